// A test's own XDG_CACHE_HOME: an empty folder under the test's temp dir for the lifetime of the
// object, then the old value (or none) back and the folder removed, also when an ASSERT returns
// early. For the caches ljperf keeps per host (rates, peak, MPI collectives).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace lj {

class TempCacheHome {
 public:
  explicit TempCacheHome(const std::string& name) : dir_(::testing::TempDir() + "/" + name) {
    std::filesystem::remove_all(dir_);
    const char* old = std::getenv("XDG_CACHE_HOME");
    had_ = old != nullptr;
    if (had_) saved_ = old;
    setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  }
  ~TempCacheHome() {
    if (had_) {
      setenv("XDG_CACHE_HOME", saved_.c_str(), 1);
    } else {
      unsetenv("XDG_CACHE_HOME");
    }
    std::filesystem::remove_all(dir_);
  }
  TempCacheHome(const TempCacheHome&) = delete;
  TempCacheHome& operator=(const TempCacheHome&) = delete;

 private:
  std::string dir_, saved_;
  bool had_ = false;
};

}  // namespace lj
