#include "plan/time_model.h"

#include <algorithm>

#include "graph/op.h"
#include "probe/gemm_calls.h"

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

double GpuStepWork::memory_bytes_total() const {
  double t = 0;
  for (double b : memory_bytes) t += b;
  return t;
}

GpuStepWork gpu_step_work(const Graph& g, const SymEnv& env) {
  GpuStepWork w;
  for (const Node& n : g.nodes()) {
    const OpDef& def = op_def(n.op);
    if (n.op == Op::input || def.has(kAlias)) continue;
    const Cost c = node_cost(g, n, env);
    ++w.kernels;
    if (def.category == OpCategory::contraction) {
      w.gemm_flops += c.flops;
    } else if (n.op == Op::sdpa) {
      w.attention_forward_flops += c.flops;
    } else if (n.op == Op::sdpa_backward) {
      w.attention_backward_flops += c.flops;
    } else {
      w.memory_bytes[static_cast<size_t>(def.category)] += c.bytes;
    }
  }
  return w;
}

double zero_comm_bytes(int64_t num_params, int stage, int64_t world) {
  if (world <= 1) return 0;
  const double frac = static_cast<double>(world - 1) / static_cast<double>(world);
  const double m = 2.0 * static_cast<double>(num_params);  // bf16
  return (zero_shards(stage, ZeroSharded::parameters) ? 3.0 : 2.0) * frac * m;
}

double optimizer_seconds(int64_t local_params, const DeviceProfile& device, const Efficiency& eff) {
  const double per_param = device.kind == DeviceKind::cpu ? 7.0 * 4.0 : 6.0 * 4.0 + 2.0 + 2.0;
  const double bw = device.mem_bandwidth * eff.bandwidth;
  return bw > 0 ? per_param * static_cast<double>(local_params) / bw : 0.0;
}

double StepTimes::total() const {
  double t = optimizer + overhead;
  for (double c : category) t += c;
  return t;
}

std::vector<std::pair<std::string, double>> StepTimes::items() const {
  std::vector<std::pair<std::string, double>> r;
  for (size_t c = 0; c < category.size(); ++c) {
    if (category[c] > 0) r.emplace_back(category_name(static_cast<OpCategory>(c)), category[c]);
  }
  r.emplace_back("optimizer", optimizer);
  r.emplace_back("overhead", overhead);
  return r;
}

double hot_factor(const HostRates& rates, double bytes) {
  const double cold = rates.pointwise_bandwidth(bytes), hot = rates.pointwise_hot_bandwidth(bytes);
  return cold > 0 && hot > cold ? cold / hot : 1.0;
}

bool is_recompute_clone(const Node& n) {
  return n.phase == Phase::backward && n.attrs.b_or("recompute", false);
}

bool reads_just_produced(const Graph& g, const Node& n) {
  if (!is_recompute_clone(n)) return false;
  return std::any_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) {
    const Node& p = g.producer(v);
    return p.op != Op::input && is_recompute_clone(p);
  });
}

namespace {

double expert_exchange_seconds(const Graph& g, const Node& n, const SymEnv& env,
                               const CommRates& comm) {
  const auto ranks = static_cast<double>(n.attrs.i("ranks"));
  if (ranks < 2 || comm.world_size < 2) return 0;
  // What this rank sends: ep_route the per-expert counts (int64 on the wire), ep_dispatch its
  // routed rows, ep_combine as many rows back (what it received: as many on average).
  std::vector<int64_t> dims;
  const ValueId sent = n.op == Op::ep_combine ? n.outputs[0] : n.inputs[0];
  if (!g.type(sent).shape.eval(env, &dims)) return 0;
  const double elem = n.op == Op::ep_route ? 8.0 : dtype_size(g.type(sent).dtype);
  const double bytes = elem * static_cast<double>(numel_of(dims));
  // The rates are for an all-to-all over the world's W ranks, where a rank copies (W-1)/W of what
  // it sends to the others; over the group's P ranks it copies (P-1)/P. The same copying, as the
  // probe counts bytes (W × what a rank sends):
  const auto world = static_cast<double>(comm.world_size);
  const double as_world = bytes * ((ranks - 1) / ranks) / ((world - 1) / world);
  return comm.seconds(CollectiveKind::all_to_all, world * as_world);
}

}  // namespace

double collective_transfer_seconds(const Graph& g, const Node& n, const SymEnv& env,
                                   const CommRates& comm) {
  if (n.op == Op::ep_route || n.op == Op::ep_dispatch || n.op == Op::ep_combine)
    return expert_exchange_seconds(g, n, env, comm);
  if (n.op != Op::grad_reduce_start && n.op != Op::param_gather_start) return 0;
  std::vector<int64_t> dims;
  if (!g.type(n.outputs[0]).shape.eval(env, &dims)) return 0;
  const double bytes = 4.0 * static_cast<double>(numel_of(dims));  // f32 buffer
  if (n.op == Op::param_gather_start) return comm.seconds(CollectiveKind::all_gather, bytes);
  const bool sharded = zero_shards(static_cast<int>(n.attrs.i("stage")), ZeroSharded::gradients);
  return comm.seconds(sharded ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, bytes);
}

double zero_param_gather_seconds(const CommRates& comm, const ZeroConfig& zero,
                                 int64_t shard_numel) {
  // The updated parameters are gathered where the optimizer states are sharded and they are not.
  if (!zero.shards(ZeroSharded::optimizer_states) || zero.shards(ZeroSharded::parameters) ||
      comm.world_size < 2 || shard_numel <= 0)
    return 0;
  const int64_t chunk = std::max<int64_t>(1, zero.allgather_bucket_size / comm.world_size);
  double s = 0;
  for (int64_t at = 0; at < shard_numel; at += chunk) {
    const int64_t n = std::min(chunk, shard_numel - at);
    s += comm.seconds(CollectiveKind::all_gather, 4.0 * static_cast<double>(n * comm.world_size));
  }
  return s;
}

StepTimes host_step_times(const Graph& g, const SymEnv& env, const HostRates& rates, int64_t params,
                          const CommRates* comm) {
  StepTimes t;
  const auto per_byte = [](double bytes, double bw) { return bw > 0 ? bytes / bw : 0.0; };
  for (const Node& n : g.nodes()) {
    const OpDef& def = op_def(n.op);
    // param_gather_wait aliases its buffer but is where the step waits for the gather.
    const bool gather_wait = comm != nullptr && n.op == Op::param_gather_wait;
    if (n.op == Op::input || (def.has(kAlias) && !gather_wait)) continue;
    const Cost c = node_cost(g, n, env);
    double s = 0;
    switch (def.category) {
      case OpCategory::contraction: {
        const NodeGemms ng = node_gemms(g, n, env);
        for (const auto& [shape, count] : ng.gemms)
          s += static_cast<double>(count) * rates.gemm_seconds(shape);
        // The loss's pass over the logits, as cross_entropy reads them (4 B each).
        s += per_byte(4.0 * ng.logits, rates.loss_bandwidth);
        break;
      }
      case OpCategory::attention:
        s = c.flops /
            rates.attention_flops(n.op != Op::sdpa, g.type(n.inputs[0]).dtype == DType::bf16);
        break;
      case OpCategory::reduction:
        s = per_byte(c.bytes, n.op == Op::cross_entropy || n.op == Op::cross_entropy_backward
                                  ? rates.loss_bandwidth
                                  : rates.reduction_bandwidth);
        break;
      case OpCategory::collective:
        if (comm == nullptr) break;  // not measured: the collectives cost nothing
        // A host collective progresses only inside the rank's own MPI calls (GradSync::poll's
        // MPI_Test after each kernel, then the wait): Open MPI 4.1's nonblocking collectives
        // (coll/libnbc) have no progress thread, and a shared-memory transfer is this rank's
        // CPU copying and summing. So its transfer hides behind nothing, overlap_comm or not:
        // measured on `small` at --np 2 with 1 MB buckets, overlap_comm on exposed 164.4 ms
        // against 167.5 off (bench/plan/comm/RESULTS.md), where a timeline that let the buckets
        // run behind backward predicted 75.9 ms.
        s = collective_transfer_seconds(g, n, env, *comm);
        if (n.op == Op::ep_dispatch) {
          // The receive buffer's rows past the received ones are zeroed: (P-1)/P of it.
          const double ranks = static_cast<double>(n.attrs.i("ranks"));
          s += per_byte(c.bytes * (ranks - 1) / (ranks + 1), rates.pointwise_bandwidth(c.bytes));
        }
        if (n.op == Op::ep_route || n.op == Op::ep_dispatch || n.op == Op::ep_combine)
          t.expert_exchange += s;
        // Packing the bucket's gradients into its buffer, and unpacking them after the wait.
        if (n.op == Op::grad_reduce_start || n.op == Op::grad_reduce_wait)
          s += per_byte(c.bytes, rates.pointwise_bandwidth(c.bytes));
        break;
      case OpCategory::data_movement:
        s = per_byte(c.bytes, rates.movement_bandwidth);
        break;
      default:
        s = per_byte(c.bytes, rates.pointwise_bandwidth(c.bytes));
        break;
    }
    // A recomputed memory-bound kernel whose inputs the clone before it just produced finds
    // them in cache: its time scaled by the pointwise kernels' cold / hot ratio at its bytes.
    const bool memory_bound = def.category == OpCategory::elementwise ||
                              def.category == OpCategory::data_movement ||
                              def.category == OpCategory::reduction;
    if (memory_bound && reads_just_produced(g, n)) {
      const double hot = s * hot_factor(rates, c.bytes);
      t.recompute_hot_saving += s - hot;
      s = hot;
    }
    t.category[static_cast<size_t>(def.category)] += s;
    t.overhead += rates.kernel_seconds;
  }
  t.optimizer = per_byte(32.0 * static_cast<double>(params), rates.optimizer_bandwidth);
  return t;
}

}  // namespace lj
