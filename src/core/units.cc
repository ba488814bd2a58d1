#include "core/units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <utility>

namespace lj {

StatusOr<double> parse_bytes(const std::string& text) {
  const char* s = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  std::string unit(end);
  unit.erase(
      std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }),
      unit.end());
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::pair<const char*, double> units[] = {{"", 1},
                                                  {"b", 1},
                                                  {"k", 1e3},
                                                  {"kb", 1e3},
                                                  {"kib", 1024.0},
                                                  {"m", 1e6},
                                                  {"mb", 1e6},
                                                  {"mib", 1048576.0},
                                                  {"g", 1e9},
                                                  {"gb", 1e9},
                                                  {"gib", 1073741824.0},
                                                  {"t", 1e12},
                                                  {"tb", 1e12},
                                                  {"tib", 1099511627776.0}};
  if (end == s || !(v > 0)) {
    return invalid_argument("cannot read '" + text + "' as a memory size",
                            "e.g. --memory-limit 20GiB, 512MiB or 1000000000");
  }
  for (const auto& [name, mult] : units) {
    if (unit == name) return v * mult;
  }
  return invalid_argument("unknown unit in '" + text + "'",
                          "use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB");
}

std::string format_params(int64_t params) {
  const auto p = static_cast<double>(params);
  char buf[32];
  if (p >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2fB", p / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), p >= 1e7 ? "%.1fM" : "%.2fM", p / 1e6);
  }
  return buf;
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%.0f B", v);
  } else {
    std::snprintf(buf, sizeof buf, std::fabs(v) < 10 ? "%.2f %s" : "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.0f us", s * 1e6);
  } else if (s < 1.0) {
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  } else if (s < 60.0) {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  } else {
    const int m = static_cast<int>(s / 60.0);
    std::snprintf(buf, sizeof buf, "%d min %02d s", m, static_cast<int>(s - m * 60.0));
  }
  return buf;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace lj
