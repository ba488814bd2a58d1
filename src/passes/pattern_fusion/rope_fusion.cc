// rope_fusion: HF apply_rotary_pos_emb as models/llama.cc writes it,
//     add(mul(x, cos), mul(concat({neg(slice(x, -1, D/2, D)), slice(x, -1, 0, D/2)}, -1), sin))
// (the add and both muls with operands in either order; x (..., T, D), cos and sin (T, D))
// becomes rope(x, cos, sin) {inverse=false}.
#include "core/log.h"
#include "passes/pattern_fusion/pattern_fusion.h"
#include "passes/pattern_fusion/rewrite.h"

namespace lj {
namespace {

// slice(x, last axis, start, end) of the given x.
bool is_slice(const Graph& g, NodeId n, ValueId x, int64_t start, int64_t end) {
  const Node& s = g.node(n);
  const int rank = g.type(x).shape.rank();
  return s.inputs[0] == x && fusion::norm_axis(s.attrs.i("axis"), rank) == rank - 1 &&
         s.attrs.i("start") == start && s.attrs.i("end") == end;
}

// rotate_half(x) = concat({neg(slice(x, h, D)), slice(x, 0, h)}, last): on success sets x and the
// nodes (slice hi, neg, slice lo, concat).
bool match_rotate_half(const Graph& g, const fusion::Rewriter& rw, ValueId rot, ValueId* x,
                       std::vector<NodeId>* nodes) {
  const NodeId cc = rw.match(rot, Op::concat);
  if (cc < 0 || g.node(cc).inputs.size() != 2) return false;
  const NodeId ng = rw.match(g.node(cc).inputs[0], Op::neg);
  const NodeId lo = rw.match(g.node(cc).inputs[1], Op::slice);
  if (ng < 0 || lo < 0) return false;
  const NodeId hi = rw.match(g.node(ng).inputs[0], Op::slice);
  if (hi < 0) return false;
  const ValueId src = g.node(lo).inputs[0];
  const Shape& shape = g.type(src).shape;
  if (shape.rank() < 1 || !shape.dim(-1).is_concrete()) return false;
  const int64_t d = shape.dim(-1).value();
  const int rank = shape.rank();
  if (d % 2 != 0 || fusion::norm_axis(g.node(cc).attrs.i("axis"), rank) != rank - 1) return false;
  if (!is_slice(g, lo, src, 0, d / 2) || !is_slice(g, hi, src, d / 2, d)) return false;
  *x = src;
  *nodes = {hi, ng, lo, cc};
  return true;
}

}  // namespace

StatusOr<bool> RopeFusion::run(Graph& g) {
  fusion::Rewriter rw(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& root = g.nodes()[i];
    if (root.op != Op::add || rw.claimed(static_cast<NodeId>(i))) continue;
    bool fused = false;
    for (int k = 0; k < 2 && !fused; ++k) {
      const NodeId direct = rw.match(root.inputs[static_cast<size_t>(k)], Op::mul);  // x * cos
      const NodeId rotated = rw.match(root.inputs[static_cast<size_t>(1 - k)], Op::mul);
      if (direct < 0 || rotated < 0) continue;
      for (int j = 0; j < 2 && !fused; ++j) {
        ValueId x = kNoValue;
        std::vector<NodeId> nodes;
        const ValueId rot = g.node(rotated).inputs[static_cast<size_t>(j)];
        const ValueId sin = g.node(rotated).inputs[static_cast<size_t>(1 - j)];
        if (!match_rotate_half(g, rw, rot, &x, &nodes)) continue;
        const Node& dn = g.node(direct);
        if (dn.inputs[0] != x && dn.inputs[1] != x) continue;
        const ValueId cos = dn.inputs[0] == x ? dn.inputs[1] : dn.inputs[0];
        fusion::Fusion f;
        f.node = Node{.op = Op::rope,
                      .inputs = {x, cos, sin},
                      .outputs = root.outputs,
                      .attrs = {{"inverse", false}},
                      .scope = root.scope,
                      .phase = root.phase};
        f.replaced = nodes;
        f.replaced.insert(f.replaced.end(), {direct, rotated, static_cast<NodeId>(i)});
        fused = rw.accept(std::move(f));
      }
    }
  }
  count_ = rw.accepted();
  LJ_LOG(debug) << "rope_fusion: " << count_ << " rope";
  return rw.apply(g);
}

}  // namespace lj
