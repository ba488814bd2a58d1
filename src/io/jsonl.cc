#include "io/jsonl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace lj {
namespace {

// Length of the file up to and including its last '\n' (0 if it has none). Reads backwards in
// blocks so a long log costs only its tail.
StatusOr<uint64_t> complete_lines_bytes(const std::string& path, uint64_t size_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot read " + path + ": " + std::strerror(errno));
  constexpr uint64_t kBlockBytes = 64 * 1024;
  std::vector<char> buf(kBlockBytes);
  uint64_t end = size_bytes;
  while (end > 0) {
    const uint64_t begin = end > kBlockBytes ? end - kBlockBytes : 0;
    const auto want = static_cast<size_t>(end - begin);
    const ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(begin));
    if (n != static_cast<ssize_t>(want)) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return io_error("reading " + path + ": " + std::strerror(err));
    }
    for (size_t i = want; i > 0; --i) {
      if (buf[i - 1] == '\n') {
        ::close(fd);
        return begin + i;
      }
    }
    end = begin;
  }
  ::close(fd);
  return uint64_t{0};
}

}  // namespace

Status JsonlWriter::check_appendable(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) {
    return not_found(flag + " " + path + ": folder " + dir.string() + " does not exist",
                     "create it first, or give another " + flag);
  }
  if (fs::exists(p, ec) && !fs::is_regular_file(p, ec)) {
    return invalid_argument(flag + " " + path + " is not a regular file", "give a .jsonl file");
  }
  const bool exists = fs::exists(p, ec);
  if (::access((exists ? p : dir).c_str(), W_OK) != 0) {
    return io_error(flag + " " + path + ": " + (exists ? "the file" : "folder " + dir.string()) +
                        " is not writable (" + std::strerror(errno) + ")",
                    "check its permissions, or give another " + flag);
  }
  return ok_status();
}

StatusOr<JsonlWriter> JsonlWriter::open(const std::string& path, bool append) {
  LJ_ASSIGN_OR_RETURN(AppendFile file, AppendFile::open(path, append ? AppendFile::Mode::append
                                                                     : AppendFile::Mode::truncate));
  uint64_t torn = 0;
  if (append && file.size_bytes() > 0) {
    LJ_ASSIGN_OR_RETURN(const uint64_t keep, complete_lines_bytes(path, file.size_bytes()));
    torn = file.size_bytes() - keep;
    if (torn > 0) LJ_RETURN_IF_ERROR(file.truncate_to(keep));
  }
  JsonlWriter w(std::move(file));
  w.torn_tail_bytes_ = torn;
  return w;
}

Status JsonlWriter::write(std::string_view json_line) {
  if (json_line.empty()) return invalid_argument("empty JSONL line for " + path());
  if (json_line.find('\n') != std::string_view::npos) {
    return invalid_argument("a JSONL line for " + path() + " contains a newline",
                            "serialize with dump() and no indent");
  }
  std::string line;
  line.reserve(json_line.size() + 1);
  line.append(json_line);
  line.push_back('\n');
  return file_.append(line);
}

Status JsonlWriter::flush() {
  return file_.sync();
}

}  // namespace lj
