#include "plan/time_model.h"

#include <algorithm>

#include "graph/op.h"

namespace lj {

double graph_seconds(const Graph& g, const SymEnv& env, const DeviceProfile& device,
                     const Efficiency& eff) {
  const double bw = device.mem_bandwidth * eff.bandwidth;
  double total = 0;
  for (const Node& n : g.nodes()) {
    const OpDef& def = op_def(n.op);
    if (n.op == Op::input || def.has(kAlias)) continue;
    const Cost c = node_cost(g, n, env);
    const auto cat = static_cast<size_t>(def.category);
    double peak = device.peak_fp32_flops;
    if (device.kind == DeviceKind::gpu &&
        (def.category == OpCategory::contraction || def.category == OpCategory::attention) &&
        !n.outputs.empty() && g.type(n.outputs[0]).dtype == DType::bf16) {
      peak = device.peak_bf16_flops;
    }
    const double rate = peak * eff.compute[cat];
    const double t_compute = (c.flops > 0 && rate > 0) ? c.flops / rate : 0.0;
    const double t_memory = bw > 0 ? c.bytes / bw : 0.0;
    total += std::max(t_compute, t_memory);
  }
  return total;
}

double zero_comm_bytes(int64_t num_params, int stage, int64_t world) {
  if (world <= 1) return 0;
  const double frac = static_cast<double>(world - 1) / static_cast<double>(world);
  const double m = 2.0 * static_cast<double>(num_params);  // bf16
  return (stage == 3 ? 3.0 : 2.0) * frac * m;
}

double optimizer_seconds(int64_t local_params, const DeviceProfile& device, const Efficiency& eff) {
  const double per_param = device.kind == DeviceKind::cpu ? 7.0 * 4.0 : 6.0 * 4.0 + 2.0 + 2.0;
  const double bw = device.mem_bandwidth * eff.bandwidth;
  return bw > 0 ? per_param * static_cast<double>(local_params) / bw : 0.0;
}

}  // namespace lj
