// Reading a whole (small) text file: configs, indexes, trainer state.
#pragma once

#include <string>

#include "core/status.h"

namespace lj {

// The file's bytes, or not_found "cannot read <path>" with `hint`.
StatusOr<std::string> read_text_file(const std::string& path, const std::string& hint = "");

}  // namespace lj
