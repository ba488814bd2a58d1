// Logging to stderr with a level set once from the command line (--log-level) or LJ_LOG.
// LJ_LOG(info) << "..."; Debug lines cost nothing when the level is above debug.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace lj {

enum class LogLevel { debug = 0, info = 1, warning = 2, error = 3, off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Reads LJ_LOG (debug|info|warning|error|off); unknown values are ignored.
void init_log_level_from_env();

// Where error lines go (LJ_LOG(error), failed LJ_CHECKs, the CLI's "error:" and "hint:" lines):
// stderr with no prefix unless set. A multi-process run names each rank ("rank 1: "), and a rank
// whose stdout and stderr are silenced (cli/dist_session.h) points this at its saved stderr, so
// errors still reach the user. Set once, before other threads log.
void set_error_output(int fd, std::string prefix);
// Writes prefix + `line` + newline to the error output in one write().
void write_error_line(std::string_view line);
// The same for a line about rank `rank` of a multi-process run (dist/: a collective's timeout, a
// rank ending the job): when the error output has no prefix yet (a library caller that never
// set one), "rank R: " is added, so the line always names its rank, and never twice.
void write_rank_error_line(int rank, std::string_view line);

namespace detail {
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  template <class T>
  LogLine& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream os_;
};
}  // namespace detail

}  // namespace lj

#define LJ_LOG(level)                              \
  if (::lj::LogLevel::level < ::lj::log_level()) { \
  } else                                           \
    ::lj::detail::LogLine(::lj::LogLevel::level)
