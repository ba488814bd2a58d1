#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace lj {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};
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
  std::fprintf(stderr, "%s%s\n", kPrefix[static_cast<int>(level_)], os_.str().c_str());
}
}  // namespace detail

}  // namespace lj
