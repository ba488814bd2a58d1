// Builds rendered kernels with the system compiler and loads them with dlopen, through an
// on-disk cache keyed by content.
//
// Key: FNV-1a/64 of (renderer prelude + source rendered with a neutral entry name, compiler
// flags, the compiler's `--version` first line, the CPU's feature flags: -march=native). A kernel's
// shared object is <dir>/k_<key>.so with entry `lj_k_<key>`; dir is $LJ_KERNEL_CACHE, else
// $XDG_CACHE_HOME/ljperf/kernels, else ~/.cache/ljperf/kernels. All kernels not yet cached in
// one get() are compiled in ONE compiler run into one shared object, in a temporary directory
// inside dir, then hard-linked to each kernel's name and renamed into place (atomic: a reader
// never sees a half-written file; two processes building the same kernel both end with a
// complete one). The compiler is $LJ_CXX (a command, may carry arguments; default `c++`).
//
// Failures never fail a run: a compiler that is missing or fails, or an unwritable cache, logs
// one warning per KernelCache and leaves those kernels null (the caller runs them another way,
// the CPU interpreter). Loaded objects stay loaded for the life of the process (entries handed
// out are never invalidated).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "codegen/cpp_renderer.h"

namespace lj::codegen {

struct KernelCacheOptions {
  std::string dir;    // the cache directory
  std::string cxx;    // compiler command
  std::string flags;  // compile flags (part of the key)
  // From the environment, as described above.
  static KernelCacheOptions from_env();
};

struct KernelCacheStats {
  int64_t compiled = 0;        // built by the compiler in this process (cold)
  int64_t loaded = 0;          // found on disk and loaded (warm)
  int64_t reused = 0;          // already loaded by this KernelCache
  int64_t failed = 0;          // could not be built or loaded
  int64_t compiler_runs = 0;   // compiler invocations
  double compile_seconds = 0;  // wall time in the compiler
};

class KernelCache {
 public:
  explicit KernelCache(KernelCacheOptions options = KernelCacheOptions::from_env());

  // One entry per kernel, in order; nullptr where the kernel could not be built or loaded.
  std::vector<KernelEntry> get(std::span<const Kernel> kernels);

  KernelCacheStats stats() const;
  const KernelCacheOptions& options() const { return options_; }

 private:
  bool compiler_ready();  // queries the compiler version once; false (and a warning) if unusable
  void warn_once(const std::string& message);

  KernelCacheOptions options_;
  CppRenderer renderer_;
  mutable std::mutex mu_;
  KernelCacheStats stats_;
  std::map<uint64_t, KernelEntry> loaded_;
  int compiler_state_ = 0;  // 0 unknown, 1 usable, -1 unusable
  std::string compiler_version_;
  bool warned_ = false;
};

// FNV-1a, 64 bits.
uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace lj::codegen
