// An append-only file for run logs (TensorBoard events, JSONL metrics). Invariant: the file only
// ever holds whole appends. Each append() hands its bytes to the kernel in one write() (looping
// only on a short write); if that fails part way, the file is cut back to its length before the
// append, so a failed or torn append never leaves a half record followed by later ones. A crash
// in the middle of a write() can still leave a torn tail; readers of both formats tolerate it
// (TensorBoard stops at a truncated record, JsonlWriter::open cuts a torn last line).
// One writer per file is assumed: the cut-back would be wrong if another process appended too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace lj {

class AppendFile {
 public:
  enum class Mode {
    create_new,  // fails with a Status if the file exists
    truncate,    // creates or empties
    append,      // creates or keeps the existing content
  };
  static StatusOr<AppendFile> open(const std::string& path, Mode mode);

  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // All or nothing (see the file comment).
  Status append(std::string_view bytes);
  // fsync of the file, and of its directory the first time (so a new file's name is durable).
  Status sync();
  // Cuts the file to `length_bytes` (<= size_bytes()); used to drop a torn tail.
  Status truncate_to(uint64_t length_bytes);

  uint64_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }

 private:
  AppendFile(int fd, std::string path, uint64_t size_bytes)
      : fd_(fd), path_(std::move(path)), size_bytes_(size_bytes) {}
  void close_fd();

  int fd_ = -1;
  std::string path_;
  uint64_t size_bytes_ = 0;
  bool dir_synced_ = false;
  bool broken_ = false;  // a failed append could not be cut back; refuse further appends
};

}  // namespace lj
