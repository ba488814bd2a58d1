#include "core/text_file.h"

#include <fstream>
#include <sstream>

namespace lj {

StatusOr<std::string> read_text_file(const std::string& path, const std::string& hint) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot read " + path, hint);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace lj
