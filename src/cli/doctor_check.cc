#include "cli/doctor_check.h"

namespace lj::cli {

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

}  // namespace lj::cli
