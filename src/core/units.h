// Byte and time units, and their human formatting. Names carry their unit (bytes_peak, step_ms).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace lj {

inline constexpr int64_t kKiB = 1024;
inline constexpr int64_t kMiB = 1024 * kKiB;
inline constexpr int64_t kGiB = 1024 * kMiB;

// "512 B", "3.2 KiB", "14.9 GiB".
std::string format_bytes(double bytes);
// "850 us", "12.3 ms", "4.50 s", "2 min 05 s".
std::string format_seconds(double seconds);

// Monotonic wall clock in seconds.
inline double now_seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

}  // namespace lj
