#include "models/moe.h"

#include "graph/builder_fused.h"
#include "graph/builder_moe.h"

namespace lj {
namespace {

const Dim kB = Dim::sym('B');
const Dim kT = Dim::sym('T');

}  // namespace

void moe_param_specs(const LlamaConfig& c, const std::string& prefix, std::vector<ParamSpec>* p,
                     const ExpertShard& experts) {
  const int64_t C = c.hidden_size, E = c.moe.num_experts, F = c.moe.moe_intermediate_size;
  // This rank's experts [first, first + L).
  const int64_t L = E / experts.size, first = experts.rank * L;
  p->push_back({prefix + "mlp.gate.weight", {E, C}});
  p->push_back({.name = prefix + "mlp.experts.gate_up_proj",
                .dims = {L, 2 * F, C},
                .is_expert = experts.size > 1,
                .expert_offset = first * 2 * F * C});
  p->push_back({.name = prefix + "mlp.experts.down_proj",
                .dims = {L, C, F},
                .is_expert = experts.size > 1,
                .expert_offset = first * C * F});
}

bool is_expert_param(const std::string& name) {
  return name.find(".mlp.experts.") != std::string::npos;
}

MoeMlp moe_mlp(const LlamaConfig& c, Val h, Val w_router, Val w_gate_up, Val w_down,
               const ExpertShard& experts) {
  Builder& b = *h.b;
  const int64_t C = c.hidden_size, E = c.moe.num_experts, K = c.moe.top_k;
  const Dim N = kB * kT;
  MoeMlp r;
  Val x = reshape(h, {N, C});
  Val probs, chosen, onehot;  // (N, E), (N, K), (N, K, E)
  Val token, inverse, sizes;
  {
    ScopeGuard s(b, "gate");
    probs = softmax(matmul(x, w_router, false, true), -1);
    Val idx = topk(probs, K);  // (N, K) i32
    onehot = cast(eq(reshape(idx, {N, K, 1}), iota(b, Shape{E}, 0, DType::i32)), probs.dtype());
    chosen = sum(onehot * reshape(probs, {N, 1, E}), {-1});
    if (c.moe.norm_topk_prob) chosen = chosen / sum(chosen, {-1}, /*keepdim=*/true);
    MoeSortResult sorted = moe_sort(idx, E);
    token = sorted.token, inverse = sorted.inverse, sizes = sorted.group_sizes;
  }
  {
    ScopeGuard s(b, "experts");
    Val rows = gather(x, token);  // (N*K, C), by expert
    Val local_sizes = sizes;
    ExpertRouteVals route;
    const int64_t ranks = experts.size;
    if (ranks > 1) {
      // The rows the group sends this rank's experts (the weights hold only those).
      route = ep_route(sizes, ranks);
      local_sizes = route.local_sizes;
      rows = ep_dispatch(rows, sizes, route.recv_sizes, ranks);  // (ranks*N*K, C)
    }
    Val gate_up = grouped_matmul(rows, w_gate_up, local_sizes, true);  // (N*K, 2F)
    // silu(gate) * up over the packed halves: no slice copies, and the backward writes the
    // gate-up gradient whole instead of concatenating two halves.
    Val act = swiglu_packed(gate_up);                        // (N*K, F)
    Val y = grouped_matmul(act, w_down, local_sizes, true);  // (N*K, C)
    if (ranks > 1) y = ep_combine(y, sizes, route.recv_sizes, ranks);
    Val back = reshape(gather(y, inverse), {N, K, C});  // (token, choice) order
    Val weights = reshape(chosen, {N, K, 1});
    if (weights.valid() && back.valid() && weights.dtype() != back.dtype())
      weights = cast(weights, back.dtype());
    r.out = reshape(sum(back * weights, {1}), {kB, kT, C});
  }
  {
    ScopeGuard s(b, "router_stats");
    r.load_fraction = mean(sum(onehot, {1}), {0});  // (E)
    r.prob_mean = mean(probs, {0});                 // (E)
  }
  return r;
}

Val load_balancing_loss(const LlamaConfig& c, const std::vector<MoeMlp>& layers) {
  if (layers.empty()) return {};
  Val fraction = layers[0].load_fraction, prob = layers[0].prob_mean;
  for (size_t l = 1; l < layers.size(); ++l) {
    fraction = fraction + layers[l].load_fraction;
    prob = prob + layers[l].prob_mean;
  }
  const auto n = static_cast<double>(layers.size());
  return sum(fraction * prob, {}) * (static_cast<double>(c.moe.num_experts) / (n * n));
}

}  // namespace lj
