// rms_norm_fusion: HF LlamaRMSNorm as models/llama.cc writes it,
//     y = mul(mul(x, rsqrt(add(mean(square(x), {-1}, keepdim=true), eps))), w)
// (each mul and the add with operands in either order, eps a scalar constant, w (C)) becomes
// rms_norm(x, w) {eps} with outputs (y, rstd), rstd taking over the rsqrt's value. When x itself is
// add(a, b) of equal types (the residual stream), the add joins it: add_rms_norm(a, b, w) with
// outputs (x, y, rstd), every other reader of x now reading the fused node's first output.
#include <cmath>
#include <string_view>

#include "core/log.h"
#include "passes/pattern_fusion/pattern_fusion.h"
#include "passes/pattern_fusion/rewrite.h"

namespace lj {
namespace {

struct NormMatch {
  ValueId x = kNoValue, w = kNoValue, y = kNoValue, rstd = kNoValue;
  double eps = 0;
  std::vector<NodeId> nodes;  // square, mean, add, rsqrt, mul, mul
  NodeId eps_node = -1;       // the constant (shared constants stay)
};

// A scalar constant (every dim 1) holding a finite eps >= 0.
bool match_eps(const Graph& g, NodeId n, double* eps) {
  const Node& c = g.node(n);
  for (const Dim& d : g.type(c.outputs[0]).shape.dims()) {
    if (d != Dim(1)) return false;
  }
  *eps = c.attrs.f("value");
  return std::isfinite(*eps) && *eps >= 0;
}

// mean(square(x), {last}, keepdim=true): returns whether `mean_node` is that, for this x.
bool match_mean_square(const Graph& g, const fusion::Rewriter& rw, NodeId mean_node, ValueId x,
                       NodeId* square_node) {
  const Node& mn = g.node(mean_node);
  const int rank = g.type(x).shape.rank();
  const std::vector<int64_t>& axes = mn.attrs.ints("axes");
  if (!mn.attrs.b("keepdim") || axes.size() != 1 || fusion::norm_axis(axes[0], rank) != rank - 1)
    return false;
  *square_node = rw.match(mn.inputs[0], Op::square);
  return *square_node >= 0 && g.node(*square_node).inputs[0] == x;
}

bool match_norm(const Graph& g, const fusion::Rewriter& rw, NodeId root, NormMatch* m) {
  const Node& n = g.node(root);
  for (int k = 0; k < 2; ++k) {
    const NodeId scaled = rw.match(n.inputs[static_cast<size_t>(k)], Op::mul);  // x * rstd
    if (scaled < 0) continue;
    for (int j = 0; j < 2; ++j) {
      const ValueId x = g.node(scaled).inputs[static_cast<size_t>(j)];
      const ValueId r = g.node(scaled).inputs[static_cast<size_t>(1 - j)];
      const NodeId rs = rw.match(r, Op::rsqrt);
      if (rs < 0) continue;
      const NodeId ad = rw.match(g.node(rs).inputs[0], Op::add);
      if (ad < 0) continue;
      for (int i = 0; i < 2; ++i) {
        const NodeId mn = rw.match(g.node(ad).inputs[static_cast<size_t>(i)], Op::mean);
        const NodeId cn = rw.match(g.node(ad).inputs[static_cast<size_t>(1 - i)], Op::constant);
        NodeId sq = -1;
        double eps = 0;
        if (mn < 0 || cn < 0 || !match_eps(g, cn, &eps) || !match_mean_square(g, rw, mn, x, &sq))
          continue;
        m->x = x;
        m->w = n.inputs[static_cast<size_t>(1 - k)];
        m->y = n.outputs[0];
        m->rstd = r;
        m->eps = eps;
        m->nodes = {sq, mn, ad, rs, scaled, root};
        m->eps_node = cn;
        return true;
      }
    }
  }
  return false;
}

// The layer a scope belongs to ("model.layers.3.mlp.down_proj" -> "model.layers.3"); the scope
// itself outside the layers ("model.norm"). Layers are what passes/remat recomputes.
std::string_view layer_of(std::string_view scope) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!scope.starts_with(kPrefix)) return scope;
  const size_t dot = scope.find('.', kPrefix.size());
  return dot == std::string_view::npos ? scope : scope.substr(0, dot);
}

}  // namespace

StatusOr<bool> RmsNormFusion::run(Graph& g) {
  fusion::Rewriter rw(g);
  rms_norm_ = add_rms_norm_ = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& root = g.nodes()[i];
    if (root.op != Op::mul || rw.claimed(static_cast<NodeId>(i))) continue;
    NormMatch m;
    if (!match_norm(g, rw, static_cast<NodeId>(i), &m)) continue;
    const Attrs attrs{{"eps", m.eps}};
    // With the residual add before it, when the add is exact (no broadcast) and fits, and, unless
    // fusing across layers, belongs to the norm's layer.
    const NodeId add = rw.match(m.x, Op::add);
    if (add >= 0 && (across_layers_ || layer_of(g.node(add).scope) == layer_of(root.scope))) {
      const Node& a = g.node(add);
      fusion::Fusion f;
      f.node = Node{.op = Op::add_rms_norm,
                    .inputs = {a.inputs[0], a.inputs[1], m.w},
                    .outputs = {m.x, m.y, m.rstd},
                    .attrs = attrs,
                    .scope = root.scope,
                    .phase = root.phase};
      f.replaced = m.nodes;
      f.replaced.push_back(add);
      f.optional = {m.eps_node};
      if (rw.accept(std::move(f))) {
        ++add_rms_norm_;
        continue;
      }
    }
    fusion::Fusion f;
    f.node = Node{.op = Op::rms_norm,
                  .inputs = {m.x, m.w},
                  .outputs = {m.y, m.rstd},
                  .attrs = attrs,
                  .scope = root.scope,
                  .phase = root.phase};
    f.replaced = m.nodes;
    f.optional = {m.eps_node};
    if (rw.accept(std::move(f))) ++rms_norm_;
  }
  LJ_LOG(debug) << "rms_norm_fusion: " << add_rms_norm_ << " add_rms_norm, " << rms_norm_
                << " rms_norm";
  return rw.apply(g);
}

}  // namespace lj
