#include "io/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace lj {
namespace {

// Slicing-by-8 tables: kCrcTables[0] is the classic byte table; kCrcTables[k][b] is the CRC of
// byte b followed by k zero bytes, so eight bytes are folded per step.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr CrcTables make_crc_tables() {
  constexpr uint32_t kPolyReflected = 0x82F63B78u;
  CrcTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPolyReflected : 0u);
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}
constexpr CrcTables kCrcTables = make_crc_tables();

constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
constexpr const char* kFileVersion = "brain.Event:2";

// Protobuf wire format: tag = (field << 3) | wire type.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_tag(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (uint64_t{field} << 3) | type);
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, 8);
  put_tag(out, field, kFixed64);
  put_le(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, 4);
  put_tag(out, field, kFixed32);
  put_le(out, bits, 4);
}

// int64 fields are varints of the two's-complement value (negative steps take 10 bytes).
void put_int64(std::string& out, uint32_t field, int64_t v) {
  put_tag(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// tensorflow.Event field numbers.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
// tensorflow.Summary / Summary.Value field numbers.
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;

std::string scalar_event(int64_t step, const std::vector<std::pair<std::string, double>>& values,
                         double wall_time_s) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, kValueTag, tag);
    put_float(value, kValueSimpleValue, static_cast<float>(v));
    put_bytes(summary, kSummaryValue, value);
  }
  std::string event;
  put_double(event, kEventWallTime, wall_time_s);
  put_int64(event, kEventStep, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h(buf);
  for (char& c : h) {
    if (c == '/') c = '_';
  }
  return h;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  return crc32c_extend(0, data, bytes);
}

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = crc ^ 0xFFFFFFFFu;
  while (bytes >= 8) {
    // Little-endian load of the low word, independent of host byte order.
    const uint32_t lo =
        c ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
    c = kCrcTables[7][lo & 0xFF] ^ kCrcTables[6][(lo >> 8) & 0xFF] ^
        kCrcTables[5][(lo >> 16) & 0xFF] ^ kCrcTables[4][lo >> 24] ^ kCrcTables[3][p[4]] ^
        kCrcTables[2][p[5]] ^ kCrcTables[1][p[6]] ^ kCrcTables[0][p[7]];
    p += 8;
    bytes -= 8;
  }
  while (bytes-- > 0) c = (c >> 8) ^ kCrcTables[0][(c ^ *p++) & 0xFF];
  return c ^ 0xFFFFFFFFu;
}

uint32_t mask_crc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta;
}

uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

std::string tfrecord_frame(std::string_view data) {
  std::string rec;
  rec.reserve(data.size() + 16);
  put_le(rec, data.size(), 8);
  put_le(rec, masked_crc32c(rec.data(), 8), 4);
  rec.append(data);
  put_le(rec, masked_crc32c(data.data(), data.size()), 4);
  return rec;
}

double EventWriter::now_s() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

StatusOr<EventWriter> EventWriter::open(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return invalid_argument(dir + " exists and is not a directory", "choose another log directory");
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return io_error("cannot create the event directory " + dir + ": " + ec.message(),
                    "choose a writable log directory");
  }
  const double wall_time_s = now_s();
  const std::string base = dir + "/events.out.tfevents." +
                           std::to_string(static_cast<int64_t>(std::floor(wall_time_s))) + "." +
                           host_name();
  // Two writers started in the same second on one host would share a name; take the next free.
  constexpr int kMaxNameTries = 100;
  for (int i = 0; i < kMaxNameTries; ++i) {
    const std::string path = i == 0 ? base : base + "." + std::to_string(i);
    auto file = AppendFile::open(path, AppendFile::Mode::create_new);
    if (!file.ok()) {
      if (std::filesystem::exists(path, ec)) continue;
      return file.status().with_context("opening the TensorBoard event file");
    }
    std::string event;
    put_double(event, kEventWallTime, wall_time_s);
    put_bytes(event, kEventFileVersion, kFileVersion);
    LJ_RETURN_IF_ERROR(file->append(tfrecord_frame(event)));
    return EventWriter(std::move(file).value());
  }
  return io_error("no free event file name like " + base, "clean up the event directory " + dir);
}

Status EventWriter::add_scalar(const std::string& tag, int64_t step, double value,
                               double wall_time_s) {
  return add_scalars(step, {{tag, value}}, wall_time_s);
}

Status EventWriter::add_scalars(int64_t step,
                                const std::vector<std::pair<std::string, double>>& values,
                                double wall_time_s) {
  if (values.empty()) return ok_status();
  for (const auto& [tag, v] : values) {
    if (tag.empty()) return invalid_argument("empty TensorBoard scalar tag");
  }
  return file_.append(tfrecord_frame(scalar_event(step, values, wall_time_s)));
}

Status EventWriter::flush() {
  return file_.sync();
}

}  // namespace lj
