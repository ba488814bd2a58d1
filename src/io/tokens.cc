#include "io/tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/checked_math.h"

namespace lj {
namespace {

constexpr int32_t kLlmcGpt2Magic = 20240520;
constexpr int32_t kLlmcLlama3Magic = 20240801;
constexpr size_t kLlmcHeaderBytes = 256 * 4;
// Megatron .idx: magic (9), version (8), dtype code (1), sequence count (8), document count (8).
constexpr size_t kMegatronIdxHeaderBytes = 34;

Status bad(const std::string& path, const std::string& what, const std::string& hint = "") {
  return invalid_argument(path + ": " + what,
                          hint.empty() ? "check the file and --data-format" : hint);
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// Megatron .idx: "MMIDIDX\0\0", u64 version, u8 dtype code, u64 sequences, u64 documents, then
// int32[sequences] lengths, int64[sequences] offsets, int64[documents] document indices. The
// counts are checked against the index's size (with overflow checks) before anything trusts them,
// and the sequence lengths are summed: the tokens the .bin must hold.
struct MegatronIndex {
  int width = 0;        // bytes per token
  uint64_t tokens = 0;  // the sum of the sequence lengths
};

StatusOr<MegatronIndex> read_megatron_index(const std::string& idx_path) {
  std::ifstream f(idx_path, std::ios::binary | std::ios::ate);
  if (!f) return not_found("cannot read " + idx_path);
  const auto end = f.tellg();
  if (end < 0) return io_error("cannot read " + idx_path);
  const uint64_t idx_bytes = static_cast<uint64_t>(end);
  f.seekg(0);
  uint8_t h[kMegatronIdxHeaderBytes] = {};
  if (idx_bytes < kMegatronIdxHeaderBytes || !f.read(reinterpret_cast<char*>(h), sizeof h)) {
    return bad(idx_path, "not a Megatron index (" + std::to_string(idx_bytes) +
                             " bytes, shorter than its " + std::to_string(kMegatronIdxHeaderBytes) +
                             "-byte header)");
  }
  if (std::memcmp(h, "MMIDIDX\0\0", 9) != 0)
    return bad(idx_path, "not a Megatron index (wrong magic)");
  uint64_t version = 0, sequences = 0, documents = 0;
  const uint8_t code = h[17];
  std::memcpy(&version, h + 9, 8);
  std::memcpy(&sequences, h + 18, 8);
  std::memcpy(&documents, h + 26, 8);
  if (version != 1)
    return bad(idx_path, "Megatron index version " + std::to_string(version) + ", expected 1");
  int width = 0;
  switch (code) {
    case 8:
      width = 2;  // uint16
      break;
    case 4:
      width = 4;  // int32
      break;
    default:
      return bad(idx_path, "token dtype code " + std::to_string(code) +
                               " is not supported (uint16 or int32)");
  }
  // 12 bytes per sequence (int32 length, int64 offset) and 8 per document.
  const std::optional<uint64_t> seq_bytes = checked_mul(sequences, uint64_t{12});
  const std::optional<uint64_t> doc_bytes = checked_mul(documents, uint64_t{8});
  const std::optional<uint64_t> data_bytes =
      seq_bytes && doc_bytes ? checked_add(*seq_bytes, *doc_bytes) : std::nullopt;
  const std::optional<uint64_t> want =
      data_bytes ? checked_add(*data_bytes, uint64_t{kMegatronIdxHeaderBytes}) : std::nullopt;
  if (!want || *want != idx_bytes) {
    return bad(idx_path, "the header says " + std::to_string(sequences) + " sequences and " +
                             std::to_string(documents) + " documents, which do not fit its " +
                             std::to_string(idx_bytes) + " bytes (truncated index?)");
  }
  MegatronIndex m;
  m.width = width;
  std::vector<int32_t> lengths(1 << 16);
  for (uint64_t done = 0; done < sequences;) {
    const uint64_t n = std::min<uint64_t>(lengths.size(), sequences - done);
    if (!f.read(reinterpret_cast<char*>(lengths.data()), static_cast<std::streamsize>(n * 4)))
      return io_error("cannot read the sequence lengths of " + idx_path);
    for (uint64_t i = 0; i < n; ++i) {
      if (lengths[i] < 0) {
        return bad(idx_path, "sequence " + std::to_string(done + i) + " has a negative length (" +
                                 std::to_string(lengths[i]) + ")");
      }
      const std::optional<uint64_t> sum = checked_add(m.tokens, static_cast<uint64_t>(lengths[i]));
      if (!sum) return bad(idx_path, "the sequence lengths overflow a 64-bit token count");
      m.tokens = *sum;
    }
    done += n;
  }
  return m;
}

}  // namespace

bool parse_token_format(const std::string& s, TokenFormat* out) {
  for (auto f : {TokenFormat::auto_detect, TokenFormat::llmc, TokenFormat::megatron,
                 TokenFormat::raw_u16, TokenFormat::raw_u32}) {
    if (s == token_format_name(f)) return *out = f, true;
  }
  return false;
}

const char* token_format_name(TokenFormat f) {
  switch (f) {
    case TokenFormat::auto_detect:
      return "auto";
    case TokenFormat::llmc:
      return "llmc";
    case TokenFormat::megatron:
      return "megatron";
    case TokenFormat::raw_u16:
      return "u16";
    case TokenFormat::raw_u32:
      return "u32";
  }
  return "?";
}

StatusOr<TokenFile> TokenFile::open(const std::string& path, TokenFormat format) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return not_found("cannot open data file " + path + ": " + std::strerror(errno), "check --data");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad(path, "not a regular file");
  }
  TokenFile t;
  t.path_ = path;
  t.map_bytes_ = static_cast<size_t>(st.st_size);
  if (t.map_bytes_ == 0) {
    ::close(fd);
    return bad(path, "the file is empty");
  }
  t.map_ = mmap(nullptr, t.map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (t.map_ == MAP_FAILED) {
    t.map_ = nullptr;
    return io_error("cannot map " + path + ": " + std::strerror(errno));
  }
  const auto* bytes = static_cast<const uint8_t*>(t.map_);

  std::string idx = path;
  if (idx.size() > 4 && idx.compare(idx.size() - 4, 4, ".bin") == 0)
    idx.replace(idx.size() - 4, 4, ".idx");
  int32_t magic = 0;
  if (t.map_bytes_ >= 4) std::memcpy(&magic, bytes, 4);
  if (format == TokenFormat::auto_detect) {
    if (idx != path && file_exists(idx)) {
      format = TokenFormat::megatron;
    } else if (magic == kLlmcGpt2Magic || magic == kLlmcLlama3Magic) {
      format = TokenFormat::llmc;
    } else {
      format = TokenFormat::raw_u32;
    }
  }
  t.format_ = format;
  switch (format) {
    case TokenFormat::llmc: {
      if (t.map_bytes_ < kLlmcHeaderBytes)
        return bad(path, "shorter than the 1024-byte llm.c header (truncated shard?)");
      int32_t h[3];
      std::memcpy(h, bytes, sizeof h);
      if (h[0] == kLlmcGpt2Magic) {
        if (h[1] != 1)
          return bad(path,
                     "llm.c GPT-2 shard with version " + std::to_string(h[1]) + ", expected 1");
        t.width_ = 2;
      } else if (h[0] == kLlmcLlama3Magic) {
        if (h[1] != 7)
          return bad(path,
                     "llm.c Llama 3 shard with version " + std::to_string(h[1]) + ", expected 7");
        t.width_ = 4;
      } else {
        return bad(path, "wrong magic " + std::to_string(h[0]) +
                             " for an llm.c shard (expected 20240520 or 20240801)");
      }
      const uint64_t want = kLlmcHeaderBytes + static_cast<uint64_t>(std::max(h[2], 0)) *
                                                   static_cast<uint64_t>(t.width_);
      if (h[2] < 0 || want != t.map_bytes_) {
        return bad(path, "header says " + std::to_string(h[2]) + " tokens (" +
                             std::to_string(want) + " bytes) but the file is " +
                             std::to_string(t.map_bytes_) + " bytes (truncated shard?)");
      }
      t.tokens_ = bytes + kLlmcHeaderBytes;
      t.num_tokens_ = h[2];
      break;
    }
    case TokenFormat::megatron: {
      LJ_ASSIGN_OR_RETURN(const MegatronIndex m, read_megatron_index(idx));
      t.width_ = m.width;
      const std::optional<uint64_t> want = checked_mul(m.tokens, static_cast<uint64_t>(m.width));
      if (!want || *want != static_cast<uint64_t>(t.map_bytes_)) {
        return bad(path, "its index " + idx + " lists " + std::to_string(m.tokens) + " tokens (" +
                             (want ? std::to_string(*want) : "too many") +
                             " bytes), the file holds " + std::to_string(t.map_bytes_) +
                             " bytes: a .bin and an .idx of different datasets?");
      }
      t.tokens_ = bytes;
      break;
    }
    case TokenFormat::raw_u16:
      t.width_ = 2, t.tokens_ = bytes;
      break;
    case TokenFormat::raw_u32:
      t.width_ = 4, t.tokens_ = bytes;
      break;
    case TokenFormat::auto_detect:
      break;
  }
  if (format != TokenFormat::llmc) {
    if (t.map_bytes_ % static_cast<size_t>(t.width_) != 0) {
      return bad(path,
                 std::to_string(t.map_bytes_) + " bytes is not a whole number of " +
                     std::to_string(t.width_) + "-byte tokens",
                 "use --data-format u16 or u32 to match the file");
    }
    t.num_tokens_ = static_cast<int64_t>(t.map_bytes_ / static_cast<size_t>(t.width_));
  }
  return t;
}

TokenFile::TokenFile(TokenFile&& o) noexcept {
  *this = std::move(o);
}

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) munmap(map_, map_bytes_);
    path_ = std::move(o.path_);
    format_ = o.format_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    tokens_ = o.tokens_;
    num_tokens_ = o.num_tokens_;
    width_ = o.width_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
  }
  return *this;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
}

uint32_t TokenFile::max_token() const {
  uint32_t m = 0;
  for (int64_t i = 0; i < num_tokens_; ++i) m = std::max(m, (*this)[i]);
  return m;
}

}  // namespace lj
