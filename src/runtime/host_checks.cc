// The doctor's rules and the host probes behind them; see host_checks.h.
#include "runtime/host_checks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace lj {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The whole of `s` as a non-negative int, or false.
bool parse_non_negative(std::string_view s, int* out) {
  s = trim(s);
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && *out >= 0;
}

std::string join_names(const char* const* names, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::string(names[i]);
  return out;
}

// Reads the first set (non-empty) variable of `names` into *value and *var; later ones that
// disagree go to *shadowed.
template <size_t N>
Status resolve_one(const EnvLookup& env, const char* const (&names)[N], int* value,
                   std::string* var, std::vector<std::string>* shadowed) {
  for (const char* name : names) {
    const char* v = env(name);
    if (v == nullptr || *v == '\0') continue;
    int parsed = 0;
    if (!parse_non_negative(v, &parsed)) {
      return invalid_argument(
          std::string(name) + "='" + v + "' is not a non-negative integer",
          "fix or unset it; launch variables are read in the order " + join_names(names, N));
    }
    if (var->empty()) {
      *value = parsed;
      *var = name;
    } else if (parsed != *value) {
      shadowed->push_back(std::string(name) + "=" + v + " (" + *var + "=" + std::to_string(*value) +
                          " is used)");
    }
  }
  return ok_status();
}

bool is_dotted_version(std::string_view t) {
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t.front()))) return false;
  bool dot = false;
  for (char c : t) {
    if (c == '.') {
      dot = true;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return dot && t.back() != '.';
}

// "143771 MiB" -> bytes; "[N/A]" -> 0.
bool parse_memory_size(std::string_view s, int64_t* bytes) {
  s = trim(s);
  if (s == "[N/A]" || s == "N/A" || s == "[Not Supported]") {
    *bytes = 0;
    return true;
  }
  int64_t n = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), n);
  if (r.ec != std::errc() || n < 0) return false;
  const std::string_view unit = trim(std::string_view(r.ptr, s.data() + s.size() - r.ptr));
  int64_t scale = 0;
  if (unit == "MiB" || unit.empty()) scale = int64_t{1} << 20;  // nvidia-smi's nounits is MiB
  if (unit == "GiB") scale = int64_t{1} << 30;
  if (unit == "KiB") scale = int64_t{1} << 10;
  if (unit == "B") scale = 1;
  if (scale == 0) return false;
  *bytes = n * scale;
  return true;
}

std::string gpus_phrase(int n) {
  return std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command, returning its stdout+stderr and exit status (-1 when it could not start).
std::string run_command(const std::string& command, int* exit_status) {
  std::string out;
  *exit_status = -1;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *exit_status = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string first_line(std::string_view s) {
  s = trim(s);
  return std::string(s.substr(0, s.find('\n')));
}

}  // namespace

const char* check_level_name(CheckLevel level) {
  switch (level) {
    case CheckLevel::ok:
      return "ok";
    case CheckLevel::warn:
      return "warn";
    case CheckLevel::fail:
      return "fail";
  }
  return "?";
}

StatusOr<LaunchEnv> resolve_launch_env(const EnvLookup& env) {
  LaunchEnv e;
  LJ_RETURN_IF_ERROR(resolve_one(env, kRankVars, &e.rank, &e.rank_var, &e.shadowed));
  LJ_RETURN_IF_ERROR(
      resolve_one(env, kWorldSizeVars, &e.world_size, &e.world_size_var, &e.shadowed));
  LJ_RETURN_IF_ERROR(
      resolve_one(env, kLocalRankVars, &e.local_rank, &e.local_rank_var, &e.shadowed));
  const std::string world_src = e.world_size_var.empty()
                                    ? "no world-size variable set"
                                    : e.world_size_var + "=" + std::to_string(e.world_size);
  const std::string hint = "a launcher sets one of " + join_names(kRankVars, std::size(kRankVars)) +
                           " together with one of " +
                           join_names(kWorldSizeVars, std::size(kWorldSizeVars));
  if (e.world_size < 1)
    return invalid_argument(world_src + ": world size must be at least 1", hint);
  if (e.rank >= e.world_size) {
    return invalid_argument(e.rank_var + "=" + std::to_string(e.rank) +
                                " is not below the world size (" + world_src + ")",
                            hint);
  }
  if (e.local_rank >= e.world_size) {
    return invalid_argument(e.local_rank_var + "=" + std::to_string(e.local_rank) +
                                " is not below the world size (" + world_src + ")",
                            hint);
  }
  return e;
}

StatusOr<int> parse_driver_major(std::string_view driver_version) {
  const std::string_view v = trim(driver_version);
  int major = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), major);
  if (r.ec != std::errc() || (r.ptr != v.data() + v.size() && *r.ptr != '.')) {
    return invalid_argument("'" + std::string(driver_version) + "' is not a driver version",
                            "expected a version like 580.65.06");
  }
  return major;
}

CheckLine cuda_driver_check(int driver_major, std::string_view cuda_version) {
  // Compare major.minor only: "13.0.2" is the 13.0 row.
  std::string_view mm = trim(cuda_version);
  const size_t dot1 = mm.find('.');
  if (dot1 != std::string_view::npos) mm = mm.substr(0, mm.find('.', dot1 + 1));
  for (const CudaDriverRequirement& r : kCudaDriverRequirements) {
    if (mm != r.cuda_version) continue;
    const std::string need = "CUDA " + std::string(r.cuda_version) +
                             " needs driver >= " + std::to_string(r.min_driver_major);
    if (driver_major >= r.min_driver_major) {
      return {CheckLevel::ok, need + ": driver " + std::to_string(driver_major) + " runs it", ""};
    }
    return {CheckLevel::warn, need + "; this driver is " + std::to_string(driver_major),
            "upgrade the NVIDIA driver to " + std::to_string(r.min_driver_major) +
                " or newer to use CUDA " + r.cuda_version};
  }
  std::string known;
  for (const CudaDriverRequirement& r : kCudaDriverRequirements) {
    known += (known.empty() ? "" : ", ") + std::string(r.cuda_version);
  }
  return {CheckLevel::warn,
          "no driver requirement known for CUDA " + std::string(cuda_version) +
              " (the image's release note lists CUDA " + known + ")",
          "see NVIDIA's CUDA compatibility table for the driver it needs"};
}

StatusOr<std::string> parse_nvidia_proc_version(std::string_view text) {
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    const size_t at = line.find("NVRM version:");
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(at + std::strlen("NVRM version:")));
    std::string w;
    while (words >> w) {
      if (is_dotted_version(w)) return w;
    }
  }
  return invalid_argument("no 'NVRM version:' line with a driver version",
                          "expected the text of /proc/driver/nvidia/version");
}

StatusOr<std::vector<GpuDevice>> parse_nvidia_smi_csv(std::string_view text) {
  std::vector<GpuDevice> gpus;
  std::istringstream lines{std::string(text)};
  std::string raw;
  while (std::getline(lines, raw)) {
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    // Split from the right: a GPU name could hold a comma, the other two fields cannot.
    const size_t c2 = line.rfind(',');
    const size_t c1 =
        c2 == std::string_view::npos || c2 == 0 ? std::string_view::npos : line.rfind(',', c2 - 1);
    const std::string bad = "nvidia-smi line '" + std::string(line) + "'";
    const std::string hint =
        "expected 'name, driver_version, memory.total' as from nvidia-smi "
        "--query-gpu=name,driver_version,memory.total --format=csv,noheader";
    if (c1 == std::string_view::npos)
      return invalid_argument(bad + " does not have 3 fields", hint);
    GpuDevice g;
    g.name = std::string(trim(line.substr(0, c1)));
    g.driver_version = std::string(trim(line.substr(c1 + 1, c2 - c1 - 1)));
    if (!parse_memory_size(line.substr(c2 + 1), &g.memory_bytes)) {
      return invalid_argument(bad + " has no readable memory size", hint);
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

GpuProbe probe_gpus() {
  GpuProbe p;
  const std::string proc = read_small_file("/proc/driver/nvidia/version");
  if (auto v = parse_nvidia_proc_version(proc); v.ok()) p.driver_version = *v;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end;
       !ec && it != end; it.increment(ec)) {
    ++p.proc_gpu_count;
  }
  const char* path = std::getenv("PATH");
  p.nvidia_smi_path = find_on_path("nvidia-smi", path);
  if (p.nvidia_smi_path.empty()) return p;
  // A wedged driver can hang nvidia-smi; bound it where coreutils' timeout exists.
  const std::string timeout = find_on_path("timeout", path);
  const std::string command =
      (timeout.empty() ? "" : shell_quote(timeout) + " 20 ") + shell_quote(p.nvidia_smi_path) +
      " --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1";
  int status = 0;
  const std::string out = run_command(command, &status);
  if (status != 0) {
    p.nvidia_smi_error = "nvidia-smi exited with status " + std::to_string(status) +
                         (out.empty() ? "" : ": " + first_line(out));
    return p;
  }
  auto gpus = parse_nvidia_smi_csv(out);
  if (!gpus.ok()) {
    p.nvidia_smi_error = gpus.status().message();
    return p;
  }
  p.gpus = std::move(*gpus);
  if (p.driver_version.empty() && !p.gpus.empty()) p.driver_version = p.gpus[0].driver_version;
  return p;
}

std::string recommended_nccl_ifname(int gpus_per_pod) {
  switch (gpus_per_pod) {
    case 1:
    case 2:
    case 4:
    case 8:
      return "eth0";
    case 16:
      return "hpn0";
    default:
      return "";
  }
}

CheckLine nccl_ifname_advice(int gpus_per_pod, const char* current_value) {
  std::string current = current_value == nullptr ? "" : current_value;
  const std::string shown =
      current.empty() ? "NCCL_SOCKET_IFNAME is not set" : "NCCL_SOCKET_IFNAME=" + current;
  if (!current.empty() && current.front() == '=') current.erase(0, 1);  // NCCL's exact match
  if (gpus_per_pod <= 0) {
    return {CheckLevel::ok, shown + "; no GPUs in this pod, so NCCL is not used", ""};
  }
  const std::string pod = "a pod using " + gpus_phrase(gpus_per_pod);
  const std::string want = recommended_nccl_ifname(gpus_per_pod);
  if (want.empty()) {
    return {CheckLevel::warn,
            shown + "; the image's guidance covers pods of 1, 2, 4, 8 or 16 GPUs, not " +
                std::to_string(gpus_per_pod),
            "use NCCL_SOCKET_IFNAME=eth0 for 1, 2, 4 or 8 GPUs per pod and hpn0 when a pod "
            "uses all 16 GPUs of a host; otherwise name the interface your cluster uses"};
  }
  const std::string why = want == "hpn0" ? " (HPN, for a pod with all 16 GPUs of a host)" : "";
  if (current == want) return {CheckLevel::ok, shown + ", right for " + pod, ""};
  if (current.empty()) {
    return {CheckLevel::warn, shown + "; " + pod + " should use " + want + why,
            "export NCCL_SOCKET_IFNAME=" + want};
  }
  return {CheckLevel::warn, shown + ", but " + pod + " should use " + want + why,
          "export NCCL_SOCKET_IFNAME=" + want};
}

CheckLine stage3_prefetch_advice(std::string_view json_text, const std::string& src) {
  using json = nlohmann::json;
  const std::string key = "zero_optimization.stage3_prefetch_bucket_size";
  const std::string advice = "leave it empty or set it to \"auto\"";
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return {CheckLevel::fail, src + ": not valid JSON", "check the DeepSpeed config's syntax"};
  if (!j.is_object())
    return {CheckLevel::fail, src + ": not a JSON object", "a DeepSpeed config is one JSON object"};
  const auto zo = j.find("zero_optimization");
  if (zo == j.end() || zo->is_null()) {
    return {CheckLevel::ok, src + ": no zero_optimization block, so " + key + " is empty", ""};
  }
  if (!zo->is_object()) {
    return {CheckLevel::fail, src + ": zero_optimization is " + zo->dump() + ", not an object",
            "zero_optimization holds the ZeRO settings as a JSON object"};
  }
  const auto v = zo->find("stage3_prefetch_bucket_size");
  if (v == zo->end() || v->is_null()) return {CheckLevel::ok, src + ": " + key + " is empty", ""};
  if (v->is_string() && (v->get<std::string>() == "auto" || v->get<std::string>().empty())) {
    return {CheckLevel::ok, src + ": " + key + " is " + v->dump() + " (resolved as 0.9·hidden²)",
            ""};
  }
  if (v->is_number()) {
    return {CheckLevel::warn, src + ": " + key + " is set to " + v->dump(),
            advice +
                ", as the image's usage notes ask: the prefetch bucket sets how finely "
                "communication splits the compiled graph"};
  }
  return {CheckLevel::fail, src + ": " + key + " is " + v->dump() + ", not a number or \"auto\"",
          advice};
}

CheckLine deepspeed_file_advice(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return {CheckLevel::fail, "cannot read DeepSpeed config " + path + ": " + std::strerror(errno),
            "check the --deepspeed path"};
  }
  std::ostringstream text;
  text << f.rdbuf();
  return stage3_prefetch_advice(text.str(), path);
}

std::string find_on_path(const std::string& name, const char* path_env) {
  if (path_env == nullptr || name.empty()) return "";
  std::string_view rest = path_env;
  while (true) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    // An empty PATH entry is the current directory.
    const std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) return "";
    rest.remove_prefix(colon + 1);
  }
}

std::vector<std::string> network_interfaces() {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/sys/class/net", ec), end; !ec && it != end;
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string isa_names(const IsaFlags& isa) {
  std::string out;
  if (isa.avx2) out += "AVX2";
  if (isa.fma) out += std::string(out.empty() ? "" : " ") + "FMA";
  if (isa.avx512f) out += std::string(out.empty() ? "" : " ") + "AVX-512F";
  return out.empty() ? "none of AVX2, FMA, AVX-512F" : out;
}

IsaFlags compiled_isa() {
  IsaFlags f;
#ifdef __AVX2__
  f.avx2 = true;
#endif
#ifdef __FMA__
  f.fma = true;
#endif
#ifdef __AVX512F__
  f.avx512f = true;
#endif
  return f;
}

CheckLine compiled_isa_check(const IsaFlags& built, const IsaFlags& host) {
  const IsaFlags missing{built.avx2 && !host.avx2, built.fma && !host.fma,
                         built.avx512f && !host.avx512f};
  if (missing.avx2 || missing.fma || missing.avx512f) {
    return {
        CheckLevel::fail,
        "ljperf was compiled for " + isa_names(built) + " but this CPU lacks " + isa_names(missing),
        "rebuild on this host (LJ_NATIVE=ON compiles for the build machine's CPU), or with "
        "-DLJ_NATIVE=OFF for a portable binary"};
  }
  if (!built.avx2 && !built.fma && !built.avx512f) {
    return {CheckLevel::ok, "compiled without AVX2, FMA or AVX-512F (a portable build)", ""};
  }
  return {CheckLevel::ok, "compiled for " + isa_names(built) + "; this CPU has all of them", ""};
}

std::string read_small_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace lj
