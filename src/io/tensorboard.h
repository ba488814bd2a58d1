// TensorBoard event files, written by hand (no protobuf library). Format (TensorBoard's
// TFRecord framing of tensorflow.Event): a sequence of records, each
//   u64 length (LE) | u32 masked CRC-32C of those 8 bytes | data | u32 masked CRC-32C of data,
// where data is a serialized tensorflow.Event. The first record is
// Event{wall_time (1, double), file_version (3, "brain.Event:2")}; a scalar is
// Event{wall_time 1, step 2 (int64), summary 5 -> Summary{value 1 -> Value{tag 1, simple_value 2
// (float)}}}. The file is append-only (io/append_file.h): a failed write never corrupts earlier
// records, and a crash leaves at worst a truncated tail, which TensorBoard stops at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "io/append_file.h"

namespace lj {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78); crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t bytes);
// The CRC-32C of (what gave `crc`) followed by `data`: crc32c(ab) = crc32c_extend(crc32c(a), b);
// crc32c_extend(0, ...) = crc32c(...). For data read in chunks (checkpoint files).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t bytes);
// The masking TFRecord applies: ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32).
uint32_t mask_crc32c(uint32_t crc);
uint32_t unmask_crc32c(uint32_t masked);
inline uint32_t masked_crc32c(const void* data, size_t bytes) {
  return mask_crc32c(crc32c(data, bytes));
}

// One framed record around serialized protobuf bytes.
std::string tfrecord_frame(std::string_view data);

class EventWriter {
 public:
  // Creates `dir` if missing and a new `events.out.tfevents.<unix seconds>.<hostname>` in it
  // (".1", ".2", ... appended if that name is taken), then writes the file_version record.
  static StatusOr<EventWriter> open(const std::string& dir);

  // Seconds since the Unix epoch, the clock TensorBoard's wall_time uses.
  static double now_s();

  // The value is stored as a float (simple_value), as TensorBoard does.
  Status add_scalar(const std::string& tag, int64_t step, double value,
                    double wall_time_s = now_s());
  // All values in one Event (one record, one write).
  Status add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values,
                     double wall_time_s = now_s());
  // Makes everything written so far durable (fsync; writes are unbuffered).
  Status flush();

  const std::string& path() const { return file_.path(); }

 private:
  explicit EventWriter(AppendFile file) : file_(std::move(file)) {}
  AppendFile file_;
};

}  // namespace lj
