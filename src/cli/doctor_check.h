// One line of `ljperf doctor`'s report: a verdict (ok / warn / fail), what was found, and what
// to do about it. Every doctor rule (doctor_*.h) returns these; doctor.cc renders them.
#pragma once

#include <string>

namespace lj::cli {

enum class CheckLevel { ok, warn, fail };
const char* check_level_name(CheckLevel level);  // "ok", "warn", "fail"

struct CheckLine {
  CheckLevel level = CheckLevel::ok;
  std::string text;
  std::string hint;  // empty when there is nothing to do
};

}  // namespace lj::cli
