// Byte and time units, and their human formatting. Names carry their unit (bytes_peak, step_ms).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace lj {

inline constexpr int64_t kKiB = 1024;
inline constexpr int64_t kMiB = 1024 * kKiB;
inline constexpr int64_t kGiB = 1024 * kMiB;

// Parses a positive byte size: a number (fractions allowed) and an optional unit, case and
// spaces ignored: "20GiB", "512 MiB", "1.5GB", "1000000" (bytes). Binary units (KiB, MiB, GiB,
// TiB) are powers of 1024, decimal ones (K/KB, M/MB, G/GB, T/TB) powers of 1000, B is bytes.
// Returns double: sizes are fractional on input ("1.5GiB") and every caller (memory budgets,
// format_bytes) works in double; a caller that stores int64 rounds once. A value that is not a
// number above zero, or an unknown unit, is invalid_argument.
StatusOr<double> parse_bytes(const std::string& text);

// "512 B", "3.2 KiB", "14.9 GiB".
std::string format_bytes(double bytes);
// A parameter count as people write it: "0.85M", "23.7M", "8.03B".
std::string format_params(int64_t params);
// "850 us", "12.3 ms", "4.50 s", "2 min 05 s".
std::string format_seconds(double seconds);

// Monotonic wall clock in seconds.
inline double now_seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (all threads, user + system) in seconds. On a shared host a
// single-threaded run's CPU time per step is its work without the time other processes held
// the core; with several OpenMP threads it also counts their spin-waits at barriers.
double process_cpu_seconds();

}  // namespace lj
