#include "core/check.h"

#include <cstdio>
#include <cstdlib>

#include "core/log.h"

namespace lj::detail {

CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
  os_ << file << ":" << line << ": check failed: " << cond << " ";
}

CheckFailure::~CheckFailure() {
  write_error_line(os_.str());  // stderr, or where a silenced rank reports errors
  std::abort();
}

}  // namespace lj::detail
