#include "probe/host_baseline.h"

#include <fcntl.h>
#include <omp.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "backends/cpu/onednn_info.h"
#include "core/json_read.h"
#include "core/text_file.h"
#include "probe/host_cache.h"
#include "runtime/host.h"

extern char** environ;

namespace lj {
namespace {

constexpr const char* kFormat = "ljperf host baseline 1";

std::atomic<bool> probe_allowed{false};  // allow_baseline_probe

// The running binary, as a cache key: a rebuilt ljperf touches other pages.
std::string binary_identity() {
  struct stat st {};
  if (::stat("/proc/self/exe", &st) != 0) return "unknown";
  return std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec);
}

// oneDNN's ISA is part of the key: its JIT kernels are part of the baseline, and an
// AVX2-limited oneDNN (DNNL_MAX_CPU_ISA) on the same CPU holds about 2 MiB less of them.
bool same_key(const nlohmann::json& e, const HostInfo& h, int threads, const std::string& bin) {
  return cache_entry_has(e, "cpu", h.cpu_model) && cache_entry_has(e, "hostname", h.hostname) &&
         cache_entry_has(e, "threads", int64_t{threads}) && cache_entry_has(e, "binary", bin) &&
         cache_entry_has(e, "isa", cpu::onednn_info().cpu_isa);
}

// Runs `ljperf benchmark` on the tiny preset in a child and reads its record.
StatusOr<double> probe(int threads) {
  char dir_template[] = "/tmp/ljperf_baseline.XXXXXX";
  if (::mkdtemp(dir_template) == nullptr)
    return internal_error("baseline probe: cannot create a temporary directory");
  const std::string dir = dir_template;
  const std::string record = dir + "/probe.jsonl";
  const std::string t = std::to_string(threads);
  std::vector<std::string> args = {"ljperf",    "benchmark", "--model", "tiny", "--batch-size", "1",
                                   "--seq-len", "32",        "--steps", "2",    "--skip-steps", "1",
                                   "--threads", t,           "--out",   record};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    // Not a rank of the launcher that started this process.
    const std::string v = *e;
    if (v.rfind("OMPI_", 0) == 0 || v.rfind("PMIX_", 0) == 0 || v.rfind("PMI_", 0) == 0) continue;
    env_store.push_back(v);
  }
  env_store.push_back(std::string(kBaselineProbeEnv) + "=1");
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  const bool ran =
      rc == 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  auto text = read_text_file(record);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!ran || !text.ok())
    return internal_error("baseline probe: the child ljperf benchmark --model tiny failed");
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  const JsonWhere at{"the probe's record"};
  const auto unexpected = [](const Status& s) {
    return internal_error("baseline probe: unexpected record: " + s.message());
  };
  const StatusOr<double> rss = json_read<double>(
      json_member(json_member(j, "summary"), "peak_rss_bytes"), at / "summary" / "peak_rss_bytes");
  if (!rss.ok()) return unexpected(rss.status());
  // The child priced itself with baseline 0: the rest of its peak is the baseline.
  const StatusOr<double> priced =
      json_read<double>(json_member(json_member(j, "plan"), "predicted_peak_rss_bytes"),
                        at / "plan" / "predicted_peak_rss_bytes");
  if (!priced.ok()) return unexpected(priced.status());
  return *rss - *priced;
}

}  // namespace

void allow_baseline_probe() {
  probe_allowed.store(true);
}

std::string host_baseline_cache_path() {
  return host_cache_path("host_baseline.json");
}

StatusOr<HostBaseline> host_baseline(int threads, bool remeasure, bool may_probe) {
  HostBaseline b;
  b.threads = threads > 0 ? threads : omp_get_max_threads();
  const char* in_probe = std::getenv(kBaselineProbeEnv);
  if (in_probe != nullptr && *in_probe != '\0') return b;  // the probe's child: 0
  // Only the ljperf command line can run the probe (not a test binary that links the planner).
  // It used to be told by the executable's name, so a renamed copy predicted 19 MiB low.
  if (!probe_allowed.load()) may_probe = false;
  const HostInfo h = host_info();
  const std::string bin = binary_identity();
  const std::string path = host_baseline_cache_path();
  nlohmann::json entries = read_host_cache(path, kFormat);
  if (!remeasure) {
    for (const auto& e : entries) {
      const double bytes = json_number_if(json_member(e, "bytes")).value_or(0.0);
      if (same_key(e, h, b.threads, bin) && bytes > 0) {
        b.bytes = bytes;
        b.cached = true;
        b.measured = true;
        return b;
      }
    }
  }
  if (!may_probe) return b;  // 0: not measured
  const auto t0 = std::chrono::steady_clock::now();
  LJ_ASSIGN_OR_RETURN(b.bytes, probe(b.threads));
  b.measured = true;
  b.probe_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_host_cache(path, kFormat, entries,
                   [&](const nlohmann::json& e) { return same_key(e, h, b.threads, bin); },
                   {{"cpu", h.cpu_model},
                    {"hostname", h.hostname},
                    {"threads", b.threads},
                    {"binary", bin},
                    {"isa", cpu::onednn_info().cpu_isa},
                    {"bytes", b.bytes},
                    {"probe_seconds", b.probe_seconds},
                    {"time", static_cast<int64_t>(std::time(nullptr))}});
  return b;
}

}  // namespace lj
