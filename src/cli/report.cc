#include "cli/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/units.h"

namespace lj::cli {

std::string torchtitan_line(const StepLine& s) {
  const double gib = s.memory_bytes / static_cast<double>(kGiB);
  const double pct = s.memory_total_bytes > 0 ? 100.0 * s.memory_bytes / s.memory_total_bytes : 0;
  const double tflops = s.flops_per_token * s.tokens_per_s / 1e12;
  const double mfu = s.peak_flops > 0 ? 100.0 * tflops * 1e12 / s.peak_flops : 0;
  const std::string lr = s.lr >= 0 ? fmt::format("  lr: {:.2e}", s.lr) : "";
  return fmt::format(
      "step: {:>4d}  loss: {:7.4f}  grad_norm: {:7.4f}{}  memory: {:5.2f}GiB({:.2f}%)  tps: {:.0f} "
      " "
      "tflops: {:.3f}  mfu: {:.2f}%",
      s.step, s.loss, s.grad_norm, lr, gib, pct, s.tokens_per_s, tflops, mfu);
}

double gemm_bound_mfu(const std::vector<OpProfile>& profile, int64_t steps, double mfu,
                      double step_seconds) {
  double products = 0;
  for (const OpProfile& p : profile) {
    const OpCategory c = op_def(p.op).category;
    if (c == OpCategory::contraction || c == OpCategory::attention) products += p.seconds;
  }
  const double per_step = products / static_cast<double>(std::max<int64_t>(steps, 1));
  return per_step > 0 ? mfu * step_seconds / per_step : 0.0;
}

std::string profile_table(const std::vector<OpProfile>& profile, int64_t steps,
                          const HostTimes& host) {
  struct Row {
    double calls = 0, seconds[3] = {0, 0, 0}, flops = 0;
  };
  Row rows[8];
  double total = 0;
  for (const OpProfile& p : profile) {
    Row& r = rows[static_cast<int>(op_def(p.op).category)];
    r.calls += static_cast<double>(p.calls);
    r.seconds[static_cast<int>(p.phase)] += p.seconds;
    r.flops += p.flops;
    total += p.seconds;
  }
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  // Shares: of the whole step when its wall time is known, else of the kernel time.
  const bool whole = host.steps > 0 && host.step_seconds > 0;
  const double denom = whole ? host.step_seconds : total;
  std::string s = fmt::format("  {:<14} {:>7} {:>9} {:>9} {:>9} {:>6} {:>8}\n", "op category",
                              "calls", "fwd ms", "bwd ms", "opt ms", "share", "GFLOP/s");
  for (int c = 0; c < 8; ++c) {
    const Row& r = rows[c];
    if (r.calls == 0) continue;
    const double sec = r.seconds[0] + r.seconds[1] + r.seconds[2];
    s += fmt::format("  {:<14} {:>7.0f} {:>9.2f} {:>9.2f} {:>9.2f} {:>5.1f}% {:>8.1f}\n",
                     category_name(static_cast<OpCategory>(c)), r.calls / n, 1e3 * r.seconds[0] / n,
                     1e3 * r.seconds[1] / n, 1e3 * r.seconds[2] / n,
                     denom > 0 ? 100.0 * sec / denom : 0.0, sec > 0 ? r.flops / sec / 1e9 : 0.0);
  }
  // The ops that take the most time (all phases), with their own GFLOP/s: the last line.
  std::string top;
  {
    struct OpRow {
      Op op;
      double calls = 0, seconds = 0, flops = 0;
    };
    std::vector<OpRow> ops;
    for (const OpProfile& p : profile) {
      auto it = std::find_if(ops.begin(), ops.end(), [&](const OpRow& r) { return r.op == p.op; });
      if (it == ops.end()) it = ops.insert(ops.end(), OpRow{p.op});
      it->calls += static_cast<double>(p.calls);
      it->seconds += p.seconds;
      it->flops += p.flops;
    }
    std::sort(ops.begin(), ops.end(),
              [](const OpRow& a, const OpRow& b) { return a.seconds > b.seconds; });
    std::string line = "  top ops:";
    for (size_t i = 0; i < ops.size() && i < 6; ++i) {
      const OpRow& r = ops[i];
      line += fmt::format(
          "{} {} {:.1f} ms ({:.0f} calls{})", i ? "," : "", op_name(r.op), 1e3 * r.seconds / n,
          r.calls / n,
          r.flops > 0 ? fmt::format(", {:.1f} GFLOP/s", r.flops / r.seconds / 1e9) : std::string());
    }
    top = line + "\n";
  }
  if (!whole) {
    s += fmt::format(
        "  {:<14} {:>7} {:>9.2f}  (kernel time per step; the rest of a step is the host)\n",
        "total", "", 1e3 * total / n);
    return s + top;
  }
  // Per optimizer step (with gradient accumulation a step runs the graph several times).
  const double ns = static_cast<double>(host.steps);
  const double step = host.step_seconds / ns, opt = host.optimizer_seconds / ns;
  const double kernels = total / ns;
  const double outside = std::max(0.0, step - kernels - opt);
  s += fmt::format("  {:<14} {:>7} {:>29.2f} {:>5.1f}%           (host: grad norm, clip, AdamW)\n",
                   "optimizer", "", 1e3 * opt, 100.0 * opt / step);
  s += fmt::format("  {:<14} {:>7} {:>9.2f} {:>19} {:>5.1f}%           (host, between kernels)\n",
                   "outside", "", 1e3 * outside, "", 100.0 * outside / step);
  s += fmt::format("  {:<14} {:>7} {:>9.2f}  (kernels per step; step {:.2f} ms wall)\n", "total",
                   "", 1e3 * kernels, 1e3 * step);
  return s + top;
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
