#include "core/units.h"

#include <cmath>
#include <cstdio>

namespace lj {

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

}  // namespace lj
