#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <unistd.h>

namespace lj {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};
int g_error_fd = STDERR_FILENO;
std::string g_error_prefix;
}  // namespace

void set_error_output(int fd, std::string prefix) {
  std::fflush(stderr);
  g_error_fd = fd;
  g_error_prefix = std::move(prefix);
}

void write_error_line(std::string_view line) {
  std::fflush(stderr);  // what was printed before comes first
  std::string text = g_error_prefix;
  text.append(line);
  text.push_back('\n');
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(g_error_fd, p, left);
    if (n <= 0) return;  // nowhere left to report to
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void write_rank_error_line(int rank, std::string_view line) {
  if (!g_error_prefix.empty()) return write_error_line(line);
  write_error_line("rank " + std::to_string(rank) + ": " + std::string(line));
}

void set_log_level(LogLevel level) {
  g_level.store(static_cast<int>(level));
}
LogLevel log_level() {
  return static_cast<LogLevel>(g_level.load());
}

void init_log_level_from_env() {
  const char* v = std::getenv("LJ_LOG");
  if (v == nullptr) return;
  const std::string_view s(v);
  if (s == "debug") set_log_level(LogLevel::debug);
  if (s == "info") set_log_level(LogLevel::info);
  if (s == "warning") set_log_level(LogLevel::warning);
  if (s == "error") set_log_level(LogLevel::error);
  if (s == "off") set_log_level(LogLevel::off);
}

namespace detail {
LogLine::~LogLine() {
  static constexpr const char* kPrefix[] = {"debug: ", "", "warning: ", "error: ", ""};
  if (level_ >= LogLevel::error) {
    write_error_line(kPrefix[static_cast<int>(level_)] + os_.str());
    return;
  }
  std::fprintf(stderr, "%s%s\n", kPrefix[static_cast<int>(level_)], os_.str().c_str());
}
}  // namespace detail

}  // namespace lj
