// What the C++ (kernel_cache.h) and CUDA (cuda/cuda_kernel_cache.h) kernel caches share: the
// file name of a key, the sorting of a batch of kernels into those already known and those to
// build, a scratch directory, and the atomic install of a built file under its final name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codegen/kernel_cache.h"

namespace lj::codegen {

// 16 lower-case hex digits: the part of a cached file's name and symbol that is its key.
std::string hex64(uint64_t v);

// Kernels by cache key. A key in `known` (this cache built or found it before) or found by
// `on_disk(key)` (an optional Value) fills `result[i]` and counts as reused or loaded; every
// other key comes back with the indices that want it, the first of which is rendered.
template <class Value, class OnDisk>
std::map<uint64_t, std::vector<size_t>> keys_to_build(std::span<const uint64_t> keys,
                                                      std::map<uint64_t, Value>& known,
                                                      std::vector<Value>& result,
                                                      KernelCacheStats& stats, OnDisk on_disk) {
  std::map<uint64_t, std::vector<size_t>> pending;
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t key = keys[i];
    if (auto it = known.find(key); it != known.end()) {
      result[i] = it->second;
      ++stats.reused;
    } else if (auto p = pending.find(key); p != pending.end()) {
      p->second.push_back(i);
    } else if (std::optional<Value> found = on_disk(key)) {
      known[key] = *found;
      result[i] = *found;
      ++stats.loaded;
    } else {
      pending[key].push_back(i);
    }
  }
  return pending;
}

// A fresh directory inside `parent` (which must exist), removed with its files on destruction.
// path() is empty when it could not be made.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Puts `built` (one file of a scratch directory) in place as `final_path`: hard-linked under
// `staged` in the same directory, then renamed over the final name, so a reader sees either no
// file or a whole one. False when either step fails.
bool install_file(const std::string& built, const std::string& staged,
                  const std::string& final_path);

}  // namespace lj::codegen
