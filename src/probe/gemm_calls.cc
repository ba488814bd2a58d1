#include "probe/gemm_calls.h"

#include <cmath>

#include "backends/cpu/cpu.h"
#include "graph/moe_rows.h"
#include "graph/op.h"

namespace lj {
namespace {

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

}  // namespace

NodeGemms node_gemms(const Graph& g, const Node& n, const SymEnv& env) {
  NodeGemms r;
  std::vector<int64_t> a, b;
  if (n.inputs.size() < 2 || !g.type(n.inputs[0]).shape.eval(env, &a) ||
      !g.type(n.inputs[1]).shape.eval(env, &b) || a.size() < 2 || b.size() < 2)
    return r;
  const bool bf16 = g.type(n.inputs[0]).dtype == DType::bf16;
  if (n.op == Op::linear_cross_entropy) {
    // x (N, C), w (V, C): per chunk of rows (backends/cpu/loss.cc) logits = x wᵀ, dx = dlogits w,
    // dw += dlogitsᵀ x.
    const int64_t rows = a[0], dim = a[1], vocab = b[0];
    const int64_t chunk = cpu::linear_cross_entropy_chunk_rows(n.attrs, rows, vocab);
    const auto add = [&](int64_t m, int64_t count) {
      if (m <= 0 || count <= 0) return;
      r.gemms.push_back({{m, vocab, dim, false, true, 0, bf16}, count});
      r.gemms.push_back({{m, dim, vocab, false, false, 0, bf16}, count});
      r.gemms.push_back({{vocab, dim, m, true, false, 0, bf16}, count});
    };
    add(chunk, rows / chunk);
    add(rows % chunk, 1);
    r.logits = static_cast<double>(rows) * static_cast<double>(vocab);
    return r;
  }
  if (n.op == Op::grouped_matmul || n.op == Op::grouped_matmul_wgrad) {
    // One GEMM per expert over its rows (backends/cpu/moe.cc), the rows it multiplies
    // (graph/moe_rows.h) spread evenly over the experts, as a balanced router spreads them.
    std::vector<int64_t> out;
    if (!g.type(n.outputs[0]).shape.eval(env, &out) || out.size() < 2) return r;
    const auto rows =
        static_cast<int64_t>(std::llround(static_cast<double>(a[0]) * grouped_rows_fraction(g, n)));
    const bool wgrad = n.op == Op::grouped_matmul_wgrad;
    const int64_t experts = wgrad ? out[0] : b[0];
    if (experts <= 0 || rows <= 0) return r;
    const int64_t m = rows / experts, extra = rows % experts;
    for (const auto& [mm, count] : {std::pair{m + 1, extra}, std::pair{m, experts - extra}}) {
      if (mm <= 0 || count <= 0) continue;
      // wgrad: a (R, P), b (R, Q) -> (P, Q) per expert, a transposed over its mm rows.
      const GemmSample s = wgrad ? GemmSample{a[1], b[1], mm, true, false, 0, bf16}
                                 : GemmSample{mm, out[1], a[1], false, n.attrs.b("tb"), 0, bf16};
      r.gemms.push_back({s, count});
    }
    return r;
  }
  if (n.op != Op::matmul && n.op != Op::matmul_add) return r;
  const bool ta = n.attrs.b("ta"), tb = n.attrs.b("tb");
  const size_t ra = a.size(), rb = b.size();
  const int64_t k = ta ? a[ra - 2] : a[ra - 1];
  const int64_t ncols = tb ? b[rb - 2] : b[rb - 1];
  if (rb == 2 && !ta) {
    // A weight: every leading row of a in one GEMM (backends/cpu/matmul.cc).
    r.gemms.push_back({{prod(a, 0, ra - 1), ncols, k, false, tb, 0, bf16}, 1});
    return r;
  }
  const int64_t m = ta ? a[ra - 1] : a[ra - 2];
  std::vector<int64_t> out;
  if (!g.type(n.outputs[0]).shape.eval(env, &out) || out.size() < 2) return r;
  r.gemms.push_back({{m, ncols, k, ta, tb, 0, bf16}, prod(out, 0, out.size() - 2)});
  return r;
}

std::vector<GemmSample> graph_gemm_shapes(const Graph& g, const SymEnv& env) {
  std::vector<GemmSample> shapes;
  for (const Node& n : g.nodes()) {
    if (op_def(n.op).category != OpCategory::contraction) continue;
    for (const auto& [s, count] : node_gemms(g, n, env).gemms) shapes.push_back(s);
  }
  return shapes;
}

}  // namespace lj
