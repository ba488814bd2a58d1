#include "io/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "io/atomic_file.h"

namespace lj {

StatusOr<AppendFile> AppendFile::open(const std::string& path, Mode mode) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (mode == Mode::create_new) flags |= O_EXCL;
  if (mode == Mode::truncate) flags |= O_TRUNC;
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) return io_error(path + " already exists");
    return io_error("cannot open " + path + " for writing: " + std::strerror(err),
                    "check that the directory exists and is writable");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error("cannot stat " + path + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path + " is not a regular file", "give a path to a file");
  }
  return AppendFile(fd, path, static_cast<uint64_t>(st.st_size));
}

AppendFile::AppendFile(AppendFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      size_bytes_(other.size_bytes_),
      dir_synced_(other.dir_synced_),
      broken_(other.broken_) {}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    close_fd();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    size_bytes_ = other.size_bytes_;
    dir_synced_ = other.dir_synced_;
    broken_ = other.broken_;
  }
  return *this;
}

AppendFile::~AppendFile() {
  close_fd();
}

void AppendFile::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status AppendFile::append(std::string_view bytes) {
  LJ_CHECK(fd_ >= 0) << "append to a moved-from AppendFile";
  if (broken_) {
    return io_error("not appending to " + path_ + ": an earlier write failed and its partial " +
                    "record could not be removed");
  }
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      Status s = io_error("writing " + path_ + ": " + std::strerror(err), "check free disk space");
      if (left != bytes.size() && ::ftruncate(fd_, static_cast<off_t>(size_bytes_)) != 0) {
        broken_ = true;
      }
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  size_bytes_ += bytes.size();
  return ok_status();
}

Status AppendFile::sync() {
  LJ_CHECK(fd_ >= 0) << "sync of a moved-from AppendFile";
  if (::fsync(fd_) != 0) return io_error("fsync of " + path_ + ": " + std::strerror(errno));
  if (!dir_synced_) {
    LJ_RETURN_IF_ERROR(fsync_parent_dir(path_));
    dir_synced_ = true;
  }
  return ok_status();
}

Status AppendFile::truncate_to(uint64_t length_bytes) {
  LJ_CHECK(fd_ >= 0) << "truncate of a moved-from AppendFile";
  LJ_CHECK_LE(length_bytes, size_bytes_);
  if (::ftruncate(fd_, static_cast<off_t>(length_bytes)) != 0) {
    return io_error("cannot truncate " + path_ + ": " + std::strerror(errno));
  }
  size_bytes_ = length_bytes;
  return ok_status();
}

}  // namespace lj
