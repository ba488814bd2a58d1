// FLOP counts per node, from concrete dims (the op table's `flops` column). These feed MFU and
// the planner's time model, so they count useful arithmetic the way papers and PyTorch's FLOP
// counters do: a multiply-add is 2 FLOPs, and data movement is 0 (its cost is in bytes moved,
// which node_cost adds separately).
#include <cstdint>

#include "graph/op_rules.h"

namespace lj {

namespace {

double numel(const std::vector<int64_t>& dims) {
  return static_cast<double>(numel_of(dims));
}

int64_t dim_at(const std::vector<int64_t>& dims, int axis) {
  return dims[static_cast<size_t>(axis < 0 ? axis + static_cast<int>(dims.size()) : axis)];
}

}  // namespace

// Sources, casts and data movement: no arithmetic.
double flops_zero(const CostCtx&) {
  return 0;
}

// Elementwise: one FLOP per output element, whatever the op (exp counts as 1, as in the usual
// conventions; transcendental throughput is the kernel's business, not MFU's).
double flops_pointwise(const CostCtx& c) {
  return numel(c.out[0]);
}

// sum / mean / max: one add (or compare) per input element.
double flops_reduce(const CostCtx& c) {
  return numel(c.in[0]);
}

// softmax / log_softmax: ~5 per element (max, subtract, exp, sum, divide or log-subtract).
double flops_softmax(const CostCtx& c) {
  return 5 * numel(c.in[0]);
}

// matmul: 2 * batch * M * N * K. batch * M * N is the output's size; K is a's contracted dim
// (a's last dim, or its second-to-last when ta).
double flops_matmul(const CostCtx& c) {
  const int64_t k = c.attrs.b("ta") ? dim_at(c.in[0], -2) : dim_at(c.in[0], -1);
  return 2 * numel(c.out[0]) * static_cast<double>(k);
}

namespace {

// Forward attention FLOPs: two GEMMs (Q K^T and P V), 2 FLOPs per multiply-add each, so
// 4 * B * H * D per visible (query, key) pair. Causal attention counts only the pairs it computes,
// Tq * (Tq + 1) / 2 (query i sees keys 0..i), a little over half of Tq * Tk; with a window W,
// W * (W + 1) / 2 + (Tq - W) * W.
double attention_forward_flops(const CostCtx& c) {
  const std::vector<int64_t>& q = c.in[0];  // (B, H, Tq, D)
  const std::vector<int64_t>& k = c.in[1];  // (B, G, Tk, D)
  const double tq = static_cast<double>(q[2]);
  double pairs = c.attrs.b("causal") ? tq * (tq + 1) / 2 : tq * static_cast<double>(k[2]);
  const int64_t window = c.attrs.i_or("window", 0);
  if (window > 0 && window < q[2]) {
    const double w = static_cast<double>(window);
    pairs = w * (w + 1) / 2 + (tq - w) * w;
  }
  return 4 * static_cast<double>(q[0]) * static_cast<double>(q[1]) * pairs *
         static_cast<double>(q[3]);
}

}  // namespace

double flops_sdpa(const CostCtx& c) {
  return attention_forward_flops(c);
}

// The backward pass does five GEMMs of the forward's size (recompute S = Q K^T, dV = P^T dO,
// dP = dO V^T, dQ = dS K, dK = dS^T Q) against the forward's two: 2.5x.
double flops_sdpa_backward(const CostCtx& c) {
  return 2.5 * attention_forward_flops(c);
}

// cross_entropy and its backward: ~4 per logit (max, exp, sum, subtract / scale).
double flops_cross_entropy(const CostCtx& c) {
  return 4 * numel(c.in[0]);
}

// scatter_add: one add per source element.
double flops_scatter_add(const CostCtx& c) {
  return numel(c.in[1]);
}

// matmul_add: the matmul's FLOPs plus one add per output element.
double flops_matmul_add(const CostCtx& c) {
  return flops_matmul(c) + numel(c.out[0]);
}

// linear_cross_entropy: the logits GEMM, the dx and dw GEMMs (2 * N * V * C each) and ~5 per
// logit (max, exp, sum, scale), as matmul + cross_entropy and their backward.
double flops_linear_cross_entropy(const CostCtx& c) {
  const double logits = static_cast<double>(c.in[0][0]) * static_cast<double>(c.in[1][0]);
  return 3 * 2 * numel(c.in[0]) * static_cast<double>(c.in[1][0]) + 5 * logits;
}

}  // namespace lj

namespace lj {

// grouped_matmul: 2 * R * N * K over all groups together: the routed rows R are static, so the
// count does not depend on the routing.
double flops_grouped_matmul(const CostCtx& c) {
  return 2 * numel_of(c.out[0]) * static_cast<double>(c.in[0][1]);
}

// grouped_matmul_wgrad: 2 * R * P * Q (each routed row adds its outer product once).
double flops_grouped_matmul_wgrad(const CostCtx& c) {
  return 2 * static_cast<double>(c.in[0][0]) * static_cast<double>(c.in[0][1]) *
         static_cast<double>(c.in[1][1]);
}

}  // namespace lj
