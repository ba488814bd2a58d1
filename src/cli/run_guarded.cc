#include "cli/run_guarded.h"

#include <exception>

namespace lj::cli {

Status escaped_exception(const std::string& what) {
  return internal_error("unexpected exception: " + what,
                        "this is a bug in ljperf: please report it with the command line and "
                        "the input files");
}

Status run_guarded(const std::function<Status()>& command) {
  try {
    return command();
  } catch (const std::exception& e) {
    return escaped_exception(e.what());
  } catch (...) {
    return escaped_exception("an exception that is not a std::exception");
  }
}

}  // namespace lj::cli
