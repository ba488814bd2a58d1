#include "cli/report.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/units.h"

namespace lj::cli {

std::string torchtitan_line(const StepLine& s) {
  const double gib = s.memory_bytes / static_cast<double>(kGiB);
  const double pct = s.memory_total_bytes > 0 ? 100.0 * s.memory_bytes / s.memory_total_bytes : 0;
  const double tflops = s.flops_per_token * s.tokens_per_s / 1e12;
  const double mfu = s.peak_flops > 0 ? 100.0 * tflops * 1e12 / s.peak_flops : 0;
  return fmt::format(
      "step: {:>4d}  loss: {:7.4f}  grad_norm: {:7.4f}  memory: {:5.2f}GiB({:.2f}%)  tps: {:.0f}  "
      "tflops: {:.3f}  mfu: {:.2f}%",
      s.step, s.loss, s.grad_norm, gib, pct, s.tokens_per_s, tflops, mfu);
}

long long process_peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream ls(line.substr(6));
      long long kb = 0;
      ls >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace lj::cli
