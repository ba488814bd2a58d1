// JSON Lines metric logs: one JSON object per line, appended. The caller passes the object
// already serialized (nlohmann::json::dump() with no indent), which keeps this header free of
// JSON types. Each line goes to the kernel in one write() of the full line including '\n'; a
// failed write is cut back (io/append_file.h), so the file never holds half a line followed by
// more lines. Opening in append mode drops a torn last line (no final '\n') left by a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "io/append_file.h"

namespace lj {

class JsonlWriter {
 public:
  // append = false starts an empty file; append = true keeps complete existing lines.
  static StatusOr<JsonlWriter> open(const std::string& path, bool append);
  // Whether open(path, true) could write there, checked without creating or touching the file:
  // its folder exists and is writable, and the file, if there, is a writable regular file. A run
  // checks its output before its work (`flag` names it in the error).
  static Status check_appendable(const std::string& path, const std::string& flag);

  // `json_line` is one serialized JSON value with no newline in it; '\n' is added here.
  Status write(std::string_view json_line);
  // fsync: everything written so far survives a crash.
  Status flush();

  const std::string& path() const { return file_.path(); }
  // Bytes of a torn last line that open() removed (0 normally); the caller may warn.
  uint64_t torn_tail_bytes() const { return torn_tail_bytes_; }

 private:
  explicit JsonlWriter(AppendFile file) : file_(std::move(file)) {}
  AppendFile file_;
  uint64_t torn_tail_bytes_ = 0;
};

}  // namespace lj
