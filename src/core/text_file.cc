#include "core/text_file.h"

#include <fstream>

namespace lj {

Status check_input_size(uint64_t size, uint64_t max_bytes, const std::string& what) {
  if (size <= max_bytes) return ok_status();
  return out_of_range(what + " is " + std::to_string(size) + " bytes, above the " +
                          std::to_string(max_bytes) + "-byte limit",
                      "the file is not what it should be (docs/limits.md lists the limits)");
}

StatusOr<std::string> read_text_file(const std::string& path, const std::string& hint,
                                     uint64_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot read " + path, hint);
  // Read in chunks up to one byte past the bound: a stat size is not trusted (/proc files say 0,
  // a file may grow), and a huge file is never held in memory.
  std::string out;
  char buf[1 << 16];
  while (f) {
    f.read(buf, sizeof buf);
    out.append(buf, static_cast<size_t>(f.gcount()));
    if (out.size() > max_bytes) {
      return out_of_range(path + " is larger than the " + std::to_string(max_bytes) +
                              "-byte limit for this kind of file",
                          "the file is not what it should be (docs/limits.md lists the limits)");
    }
  }
  if (f.bad()) return io_error("cannot read " + path, hint);
  return out;
}

}  // namespace lj
