#include "tokenize/token_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace lj::tok {
namespace {

constexpr int32_t kLlmcGpt2Magic = 20240520;
constexpr int32_t kLlmcLlama3Magic = 20240801;
constexpr size_t kLlmcHeaderInts = 256;
constexpr size_t kLengthsBuffer = 1 << 16;

Status read_all(int fd, uint64_t offset, void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return io_error(std::string("reading the document lengths back: ") +
                      (n < 0 ? std::strerror(errno) : "short read"));
    }
    p += n, offset += static_cast<uint64_t>(n), bytes -= static_cast<size_t>(n);
  }
  return ok_status();
}

}  // namespace

OutputPaths output_paths(const std::string& path) {
  std::string stem = path;
  if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".bin") == 0)
    stem.resize(stem.size() - 4);
  return {stem + ".bin", stem + ".idx", stem + "_val.bin", stem + "_val.idx"};
}

StatusOr<std::unique_ptr<TokenWriter>> TokenWriter::create(OutputFormat format, FileWriter* out,
                                                           std::string index_path, bool wide) {
  std::unique_ptr<TokenWriter> w(new TokenWriter());
  w->format_ = format;
  w->out_ = out;
  w->index_path_ = std::move(index_path);
  w->wide_ = wide;
  if (format == OutputFormat::llmc) {
    const std::vector<int32_t> header(kLlmcHeaderInts, 0);  // filled in by finish()
    LJ_RETURN_IF_ERROR(out->write(header.data(), header.size() * sizeof(int32_t)));
  } else {
    // An unlinked scratch file beside the index: it vanishes with the process, whatever happens.
    const std::string scratch = w->index_path_ + ".lengths." + std::to_string(::getpid());
    w->lengths_fd_ = ::open(scratch.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (w->lengths_fd_ < 0)
      return io_error("cannot create " + scratch + ": " + std::strerror(errno),
                      "check that the output folder is writable");
    ::unlink(scratch.c_str());
  }
  return w;
}

TokenWriter::~TokenWriter() {
  if (lengths_fd_ >= 0) ::close(lengths_fd_);
}

Status TokenWriter::add_document(std::span<const uint32_t> ids) {
  if (format_ == OutputFormat::megatron) {
    if (ids.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      return out_of_range("a document of more than 2^31 tokens does not fit a Megatron index");
    lengths_.push_back(static_cast<int32_t>(ids.size()));
    if (lengths_.size() >= kLengthsBuffer) LJ_RETURN_IF_ERROR(flush_lengths());
  }
  if (wide_) {
    LJ_RETURN_IF_ERROR(out_->write(ids.data(), ids.size() * sizeof(uint32_t)));
  } else {
    narrow_.assign(ids.begin(), ids.end());
    LJ_RETURN_IF_ERROR(out_->write(narrow_.data(), narrow_.size() * sizeof(uint16_t)));
  }
  tokens_ += ids.size();
  ++documents_;
  return ok_status();
}

Status TokenWriter::flush_lengths() {
  const char* p = reinterpret_cast<const char*>(lengths_.data());
  size_t bytes = lengths_.size() * sizeof(int32_t);
  while (bytes > 0) {
    const ssize_t n = ::write(lengths_fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(std::string("writing the document lengths: ") + std::strerror(errno),
                      "check free disk space");
    }
    p += n, bytes -= static_cast<size_t>(n);
  }
  lengths_.clear();
  return ok_status();
}

Status TokenWriter::finish() {
  if (format_ == OutputFormat::llmc) {
    if (tokens_ > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      return out_of_range(std::to_string(tokens_) +
                              " tokens do not fit one llm.c file (its header counts in int32)",
                          "use --format megatron, or split the input");
    const int32_t head[3] = {wide_ ? kLlmcLlama3Magic : kLlmcGpt2Magic, wide_ ? 7 : 1,
                             static_cast<int32_t>(tokens_)};
    return out_->write_at(0, head, sizeof head);
  }
  LJ_RETURN_IF_ERROR(flush_lengths());
  const uint64_t n = documents_;
  return write_file_atomic(index_path_, [&](FileWriter& idx) -> Status {
    const uint64_t version = 1, docs = n + 1;
    const uint8_t code = wide_ ? 4 : 8;  // int32 or uint16
    LJ_RETURN_IF_ERROR(idx.write("MMIDIDX\0\0", 9));
    LJ_RETURN_IF_ERROR(idx.write(&version, 8));
    LJ_RETURN_IF_ERROR(idx.write(&code, 1));
    LJ_RETURN_IF_ERROR(idx.write(&n, 8));
    LJ_RETURN_IF_ERROR(idx.write(&docs, 8));
    std::vector<int32_t> lengths(kLengthsBuffer);
    for (uint64_t i = 0; i < n; i += kLengthsBuffer) {  // lengths
      const size_t k = static_cast<size_t>(std::min<uint64_t>(kLengthsBuffer, n - i));
      LJ_RETURN_IF_ERROR(read_all(lengths_fd_, i * 4, lengths.data(), k * 4));
      LJ_RETURN_IF_ERROR(idx.write(lengths.data(), k * 4));
    }
    std::vector<int64_t> offsets(kLengthsBuffer);
    int64_t offset_bytes = 0;
    const int64_t width = wide_ ? 4 : 2;
    for (uint64_t i = 0; i < n; i += kLengthsBuffer) {  // byte offsets of each sequence
      const size_t k = static_cast<size_t>(std::min<uint64_t>(kLengthsBuffer, n - i));
      LJ_RETURN_IF_ERROR(read_all(lengths_fd_, i * 4, lengths.data(), k * 4));
      for (size_t j = 0; j < k; ++j) {
        offsets[j] = offset_bytes;
        offset_bytes += lengths[j] * width;
      }
      LJ_RETURN_IF_ERROR(idx.write(offsets.data(), k * 8));
    }
    for (uint64_t i = 0; i <= n; i += kLengthsBuffer) {  // document indices 0..n
      const size_t k = static_cast<size_t>(std::min<uint64_t>(kLengthsBuffer, n + 1 - i));
      for (size_t j = 0; j < k; ++j) offsets[j] = static_cast<int64_t>(i + j);
      LJ_RETURN_IF_ERROR(idx.write(offsets.data(), k * 8));
    }
    return ok_status();
  });
}

}  // namespace lj::tok
