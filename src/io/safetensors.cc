#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/checked_math.h"
#include "core/json_read.h"
#include "io/atomic_file.h"

namespace lj {
namespace {

struct StDType {
  const char* name;
  int size;
};
constexpr StDType kStDTypes[] = {
    {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"I16", 2},     {"U16", 2},
    {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},
    {"F64", 8},  {"I64", 8},  {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

int st_dtype_size(const std::string& name) {
  for (const auto& d : kStDTypes) {
    if (name == d.name) return d.size;
  }
  return 0;
}

Status bad(const std::string& what) {
  return invalid_argument("invalid safetensors file: " + what,
                          "the file is corrupt or not a safetensors file");
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
  }
  return "?";
}

StatusOr<SafetensorsHeader> parse_safetensors(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8)
    return bad("file is " + std::to_string(bytes.size()) +
               " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  if (n > kSafetensorsMaxHeaderBytes)
    return bad("header length " + std::to_string(n) + " is above the 100,000,000-byte limit");
  if (n > bytes.size() - 8) {
    return bad("header length " + std::to_string(n) + " runs past the end of the " +
               std::to_string(bytes.size()) + "-byte file");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8),
                              static_cast<size_t>(n));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("header is not valid JSON");
  if (!j.is_object()) return bad("header is not a JSON object");
  if (j.size() > kSafetensorsMaxTensors + 1) {
    return bad("header names " + std::to_string(j.size()) + " entries, above the limit of " +
               std::to_string(kSafetensorsMaxTensors) + " tensors");
  }

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  const uint64_t buffer_len = bytes.size() - h.data_offset;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return bad("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        const std::string* s = json_string_if(m.value());
        if (s == nullptr) return bad("__metadata__ value of '" + m.key() + "' is not a string");
        h.metadata[m.key()] = *s;
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      return bad("tensor '" + name + "' lacks dtype, shape or data_offsets");
    }
    SafetensorsEntry e;
    e.name = name;
    const std::string* dtype = json_string_if(v["dtype"]);
    if (dtype == nullptr) return bad("tensor '" + name + "' has a non-string dtype");
    e.dtype_name = *dtype;
    e.dtype_size = st_dtype_size(e.dtype_name);
    if (e.dtype_size == 0)
      return bad("tensor '" + name + "' has unknown dtype '" + e.dtype_name + "'");
    if (!v["shape"].is_array()) return bad("tensor '" + name + "' shape is not an array");
    if (v["shape"].size() > static_cast<size_t>(kSafetensorsMaxRank)) {
      return bad("tensor '" + name + "' has rank " + std::to_string(v["shape"].size()) +
                 ", above the limit of " + std::to_string(kSafetensorsMaxRank));
    }
    uint64_t elems = 1;
    for (const auto& d : v["shape"]) {
      const std::optional<uint64_t> x = json_uint_if(d);
      if (!x)
        return bad("tensor '" + name + "' shape holds a value that is not a non-negative integer");
      const std::optional<uint64_t> product = checked_mul(elems, *x);
      if (*x > static_cast<uint64_t>(INT64_MAX) || !product) {
        return bad("tensor '" + name + "' shape overflows");
      }
      elems = *product;
      e.shape.push_back(static_cast<int64_t>(*x));
    }
    const auto& off = v["data_offsets"];
    const bool pair = off.is_array() && off.size() == 2;
    const std::optional<uint64_t> begin = pair ? json_uint_if(off[0]) : std::nullopt;
    const std::optional<uint64_t> end = pair ? json_uint_if(off[1]) : std::nullopt;
    if (!begin || !end) {
      return bad("tensor '" + name + "' data_offsets is not two non-negative integers");
    }
    e.begin = *begin;
    e.end = *end;
    if (e.end < e.begin) return bad("tensor '" + name + "' data_offsets end before they begin");
    const std::optional<uint64_t> size = checked_mul(elems, static_cast<uint64_t>(e.dtype_size));
    if (!size) return bad("tensor '" + name + "' size overflows");
    const uint64_t want = *size;
    if (e.end - e.begin != want) {
      return bad("tensor '" + name + "' holds " + std::to_string(e.end - e.begin) + " bytes but " +
                 e.dtype_name + " shape needs " + std::to_string(want));
    }
    if (e.end > buffer_len) {
      return bad("tensor '" + name + "' data_offsets [" + std::to_string(e.begin) + ", " +
                 std::to_string(e.end) + ") run past the " + std::to_string(buffer_len) +
                 "-byte data buffer");
    }
    h.entries.push_back(std::move(e));
  }
  // nlohmann::json objects keep one value per key (the last): duplicates must be found in the text.
  {
    size_t keys = 0;
    nlohmann::json::parser_callback_t count = [&](int depth, nlohmann::json::parse_event_t ev,
                                                  nlohmann::json&) {
      if (depth == 1 && ev == nlohmann::json::parse_event_t::key) ++keys;
      return true;
    };
    const nlohmann::json counted = nlohmann::json::parse(text, count, false);
    (void)counted;
    if (keys != j.size()) return bad("header names a tensor more than once");
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const auto& a, const auto& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t pos = 0;
  for (const auto& e : h.entries) {
    if (e.begin != pos) {
      return bad(e.begin < pos ? "tensor '" + e.name + "' overlaps the tensor before it"
                               : "gap before tensor '" + e.name + "' in the data buffer");
    }
    pos = e.end;
  }
  if (pos != buffer_len) {
    return bad("data buffer is " + std::to_string(buffer_len) + " bytes but the tensors cover " +
               std::to_string(pos));
  }
  return h;
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return io_error("cannot stat " + path);
  }
  SafetensorsFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return io_error("cannot map " + path + ": " + std::strerror(errno));
    f.map_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  auto h = parse_safetensors(std::span<const uint8_t>(f.map_, f.size_));
  if (!h.ok()) return h.status().with_context(path);
  f.header_ = std::move(h).value();
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept {
  *this = std::move(o);
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) munmap(const_cast<uint8_t*>(map_), size_);
    path_ = std::move(o.path_);
    map_ = o.map_;
    size_ = o.size_;
    header_ = std::move(o.header_);
    o.map_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(const_cast<uint8_t*>(map_), size_);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const auto& e : header_.entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::span<const uint8_t> SafetensorsFile::bytes(const SafetensorsEntry& e) const {
  return std::span<const uint8_t>(map_ + header_.data_offset + e.begin,
                                  static_cast<size_t>(e.end - e.begin));
}

Status SafetensorsFile::read_f32(const SafetensorsEntry& e, std::span<float> out) const {
  const auto src = bytes(e);
  const size_t n = src.size() / static_cast<size_t>(e.dtype_size);
  if (out.size() != n) {
    return invalid_argument(path_ + ": tensor '" + e.name + "' has " + std::to_string(n) +
                            " elements, expected " + std::to_string(out.size()));
  }
  const uint8_t* p = src.data();
  if (e.dtype_name == "F32") {
    std::memcpy(out.data(), p, n * 4);
  } else if (e.dtype_name == "F64") {
    for (size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  } else if (e.dtype_name == "BF16" || e.dtype_name == "F16") {
    const bool bf = e.dtype_name == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    return invalid_argument(path_ + ": tensor '" + e.name + "' is " + e.dtype_name +
                            ", not a float type");
  }
  return ok_status();
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["format"] = "pt";
  for (const auto& [k, v] : metadata) meta[k] = v;
  h["__metadata__"] = meta;
  uint64_t pos = 0;
  for (const auto& t : tensors) {
    if (h.contains(t.name))
      return invalid_argument("tensor '" + t.name + "' written twice to " + path);
    uint64_t bytes = static_cast<uint64_t>(dtype_size(t.dtype));
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
    h[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                 {"shape", t.shape},
                 {"data_offsets", {pos, pos + bytes}}};
    pos += bytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return write_file_atomic(path, [&](FileWriter& w) -> Status {
    uint8_t len[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    LJ_RETURN_IF_ERROR(w.write(len, 8));
    LJ_RETURN_IF_ERROR(w.write(text.data(), text.size()));
    for (const auto& t : tensors) {
      size_t bytes = static_cast<size_t>(dtype_size(t.dtype));
      for (int64_t d : t.shape) bytes *= static_cast<size_t>(d);
      LJ_RETURN_IF_ERROR(w.write(t.data, bytes));
    }
    return ok_status();
  });
}

}  // namespace lj
