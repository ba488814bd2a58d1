#include "runtime/cpu_load.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "core/units.h"

namespace lj {
namespace {

int online_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

CpuLoadMark cpu_load_mark() {
  CpuLoadMark m;
  m.wall = now_seconds();
  m.self = process_cpu_seconds();
  m.cores = online_cores();
  std::ifstream f("/proc/stat");
  std::string line;
  if (!f || !std::getline(f, line) || line.rfind("cpu ", 0) != 0) return m;
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (clock ticks; guest
  // time is already inside user and nice).
  std::istringstream in(line.substr(4));
  double v[8] = {};
  for (double& x : v) {
    if (!(in >> x)) return m;
  }
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (ticks <= 0) return m;
  m.busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / ticks;
  m.steal = v[7] / ticks;
  m.valid = true;
  return m;
}

double other_cpu_share(const CpuLoadMark& a, const CpuLoadMark& b) {
  const double wall = b.wall - a.wall;
  if (!a.valid || !b.valid || wall <= 0 || b.cores <= 0)
    return std::numeric_limits<double>::quiet_NaN();
  const double others = (b.busy - a.busy) - (b.self - a.self);
  return std::clamp(others / (wall * b.cores), 0.0, 1.0);
}

double steal_share(const CpuLoadMark& a, const CpuLoadMark& b) {
  const double wall = b.wall - a.wall;
  if (!a.valid || !b.valid || wall <= 0 || b.cores <= 0)
    return std::numeric_limits<double>::quiet_NaN();
  return std::clamp((b.steal - a.steal) / (wall * b.cores), 0.0, 1.0);
}

double load_per_core() {
  std::ifstream f("/proc/loadavg");
  double one = 0;
  if (!f || !(f >> one)) return std::numeric_limits<double>::quiet_NaN();
  return one / online_cores();
}

}  // namespace lj
