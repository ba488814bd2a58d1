// The last line of defence against an exception that escapes a command (a bug: errors travel as
// Status): it becomes one "error: ..." line and exit status 1, not std::terminate's abort (134).
#pragma once

#include <functional>
#include <string>

#include "core/status.h"

namespace lj::cli {

// internal_error naming `what` (an exception's what()), with a hint to report it.
Status escaped_exception(const std::string& what);

// `command`'s Status; an exception that escapes it becomes escaped_exception(its what()).
Status run_guarded(const std::function<Status()>& command);

}  // namespace lj::cli
