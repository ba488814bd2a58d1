#include "codegen/kernel_cache.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/cache_files.h"
#include "core/log.h"

namespace lj::codegen {
namespace fs = std::filesystem;
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string quoted(const std::string& path) {
  std::string out = "'";
  for (char c : path) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The first line of `cmd`'s stdout; false when it cannot run or exits non-zero.
bool first_line_of(const std::string& cmd, std::string* line) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  char buf[512];
  line->clear();
  if (std::fgets(buf, sizeof(buf), p) != nullptr) *line = buf;
  while (std::fgets(buf, sizeof(buf), p) != nullptr) {
  }
  const int rc = pclose(p);
  while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
  return rc == 0 && !line->empty();
}

// What -march=native compiles for: the CPU's feature flags (the first "flags" line of
// /proc/cpuinfo; empty elsewhere). In the key, so a cache shared between machines (a network
// home) never hands one machine another's instructions.
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) return line;
  }
  return "";
}

KernelEntry load(const std::string& path, const std::string& symbol) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return nullptr;
  void* f = dlsym(h, symbol.c_str());
  return reinterpret_cast<KernelEntry>(f);
}

}  // namespace

uint64_t fnv1a64(std::string_view data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

KernelCacheOptions KernelCacheOptions::from_env() {
  KernelCacheOptions o;
  const std::string home = env_or("HOME", "/tmp");
  const std::string xdg = env_or("XDG_CACHE_HOME", home + "/.cache");
  o.dir = env_or("LJ_KERNEL_CACHE", xdg + "/ljperf/kernels");
  o.cxx = env_or("LJ_CXX", "c++");
  o.flags = "-std=c++17 -O3 -march=native -fopenmp -fno-math-errno -shared -fPIC -w";
  return o;
}

KernelCache::KernelCache(KernelCacheOptions options) : options_(std::move(options)) {}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void KernelCache::warn_once(const std::string& message) {
  if (warned_) return;
  warned_ = true;
  LJ_LOG(warning) << message
                  << "; fused kernels run in the interpreter (correct, slower). hint: install a "
                     "C++ compiler or set LJ_CXX; LJ_KERNEL_CACHE sets the cache directory";
}

bool KernelCache::compiler_ready() {
  if (compiler_state_ == 0) {
    const bool ok = first_line_of(options_.cxx + " --version 2>/dev/null", &compiler_version_);
    compiler_state_ = ok ? 1 : -1;
    compiler_version_ += "\n" + cpu_identity();
    if (!ok) warn_once("kernel compiler '" + options_.cxx + "' does not run");
  }
  return compiler_state_ == 1;
}

std::vector<KernelEntry> KernelCache::get(std::span<const Kernel> kernels) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<KernelEntry> result(kernels.size(), nullptr);
  if (kernels.empty()) return result;
  if (!compiler_ready()) {
    stats_.failed += static_cast<int64_t>(kernels.size());
    return result;
  }
  const std::string prelude = renderer_.prelude();
  std::vector<uint64_t> keys(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string neutral = renderer_.render(kernels[i], "lj_kernel_entry").source;
    keys[i] = fnv1a64(prelude + neutral + "\n" + renderer_.name() + "\n" + options_.flags + "\n" +
                      compiler_version_);
  }
  // Kernels to build, by key: the first kernel index and every index that wants it.
  const std::map<uint64_t, std::vector<size_t>> pending =
      keys_to_build(std::span<const uint64_t>(keys), loaded_, result, stats_,
                    [&](uint64_t key) -> std::optional<KernelEntry> {
                      const std::string hex = hex64(key);
                      const std::string path = options_.dir + "/k_" + hex + ".so";
                      std::error_code ec;
                      if (!fs::exists(path, ec)) return std::nullopt;
                      KernelEntry f = load(path, "lj_k_" + hex);
                      return f != nullptr ? std::optional<KernelEntry>(f) : std::nullopt;
                    });
  if (pending.empty()) return result;

  auto fail = [&](const std::string& why) {
    warn_once(why);
    for (const auto& [key, idx] : pending) stats_.failed += static_cast<int64_t>(idx.size());
    return result;
  };
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) return fail("cannot create the kernel cache " + options_.dir + ": " + ec.message());
  const ScratchDir scratch(options_.dir);
  if (scratch.path().empty()) return fail("cannot create a temporary directory in " + options_.dir);
  const std::string& tmp = scratch.path();

  {
    std::ofstream src(tmp + "/kernels.cc");
    src << prelude;
    for (const auto& [key, idx] : pending)
      src << renderer_.render(kernels[idx[0]], "lj_k_" + hex64(key)).source;
    if (!src) return fail("cannot write kernel source in " + tmp);
  }
  const std::string so = tmp + "/kernels.so", log = tmp + "/compile.log";
  const std::string cmd = options_.cxx + " " + options_.flags + " -o " + quoted(so) + " " +
                          quoted(tmp + "/kernels.cc") + " > " + quoted(log) + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.c_str());
  stats_.compile_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.compiler_runs;
  if (rc != 0) {
    std::ifstream in(log);
    std::string first;
    std::getline(in, first);
    const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : rc;
    return fail("kernel compiler failed (" + options_.cxx + ", exit status " +
                std::to_string(code) + ")" + (first.empty() ? "" : ": " + first));
  }
  for (const auto& [key, idx] : pending) {
    const std::string hex = hex64(key);
    const std::string staged = tmp + "/k_" + hex + ".so";
    const std::string path = options_.dir + "/k_" + hex + ".so";
    KernelEntry f = nullptr;
    if (install_file(so, staged, path)) f = load(path, "lj_k_" + hex);
    if (f == nullptr) {
      warn_once("cannot install or load kernel " + path);
      stats_.failed += static_cast<int64_t>(idx.size());
      continue;
    }
    loaded_[key] = f;
    ++stats_.compiled;
    for (size_t i : idx) result[i] = f;
  }
  return result;
}

}  // namespace lj::codegen
