#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace lj {

Status FileWriter::write(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("writing " + path_ + ": " + std::strerror(errno), "check free disk space");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return ok_status();
}

Status FileWriter::write_at(uint64_t offset, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("writing " + path_ + ": " + std::strerror(errno), "check free disk space");
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return ok_status();
}

Status fsync_parent_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open directory " + dir + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return io_error("fsync of " + dir + ": " + std::strerror(errno));
  return ok_status();
}

Status write_file_atomic(const std::string& path, const std::function<Status(FileWriter&)>& fill) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return io_error("cannot create " + path + ": " + std::strerror(errno),
                    "check that the directory exists and is writable");
  }
  // Errors name the user's path: the temporary beside it is this function's business.
  FileWriter w(fd, path);
  Status s = fill(w);
  const char* kDiskHint = "check the disk's free space (df) and that it is writable";
  if (s.ok() && ::fsync(fd) != 0)
    s = io_error("fsync of " + path + ": " + std::strerror(errno), kDiskHint);
  if (::close(fd) != 0 && s.ok())
    s = io_error("closing " + path + ": " + std::strerror(errno), kDiskHint);
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = io_error("cannot put " + path + " in place: " + std::strerror(errno),
                 "is a folder of that name in the way? Remove it, or give another path");
  }
  if (!s.ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  return fsync_parent_dir(path);
}

Status copy_file_atomic(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) return not_found("cannot read " + from, "check the path");
  return write_file_atomic(to, [&](FileWriter& w) {
    char buf[1 << 16];
    while (in) {
      in.read(buf, sizeof buf);
      if (in.gcount() > 0) LJ_RETURN_IF_ERROR(w.write(buf, static_cast<size_t>(in.gcount())));
    }
    if (in.bad()) return io_error("reading " + from + " failed", "check the file and the disk");
    return ok_status();
  });
}

}  // namespace lj
