// Writing files so that nothing is half-written: data goes to `<path>.tmp.<pid>` beside the
// target, is fsynced, renamed over the target, and the directory is fsynced. On any error the
// temporary is removed and the target is untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace lj {

class FileWriter {
 public:
  explicit FileWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status write(const void* data, size_t bytes);
  // Overwrites bytes already written (a header whose counts are known only at the end).
  Status write_at(uint64_t offset, const void* data, size_t bytes);

 private:
  int fd_;
  std::string path_;
};

Status write_file_atomic(const std::string& path, const std::function<Status(FileWriter&)>& fill);
// A copy of the file `from` written as write_file_atomic writes (a tokenizer.json into a run).
Status copy_file_atomic(const std::string& from, const std::string& to);
// fsync of the directory holding `path` (makes a rename durable).
Status fsync_parent_dir(const std::string& path);

}  // namespace lj
