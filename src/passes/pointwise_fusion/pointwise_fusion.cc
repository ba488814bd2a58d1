#include "passes/pointwise_fusion/pointwise_fusion.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "codegen/kernel_ir.h"
#include "graph/op_rules.h"

namespace lj {
namespace {

// The dtype a group computes in for a value of dtype t: f32 for f32 and bf16 (a kernel loads
// and stores bf16, codegen/kernel_ir.h), f64 for f64; u8 (none) for anything else.
DType compute_dtype(DType t) {
  if (t == DType::f32 || t == DType::bf16) return DType::f32;
  if (t == DType::f64) return DType::f64;
  return DType::u8;
}
bool is_compute_dtype(DType t) {
  return compute_dtype(t) != DType::u8;
}

// A fusible elementwise math op the kernel IR can express (cast between dtypes of one compute
// dtype among them: a rounding to bf16, or nothing).
bool is_member_op(Op op) {
  const OpDef& def = op_def(op);
  return def.has(kFusible) && def.category == OpCategory::elementwise &&
         (codegen::is_kernel_unary(op) || codegen::is_kernel_binary(op) || op == Op::cast);
}

// sum / mean / max over exactly the last axis.
bool is_last_axis_reduction(const Graph& g, const Node& n) {
  if (n.op != Op::sum && n.op != Op::mean && n.op != Op::max) return false;
  if (!op_def(n.op).has(kFusible)) return false;
  const int rank = g.type(n.inputs[0]).shape.rank();
  if (!n.attrs.has("axes")) return false;
  const std::vector<int64_t>& axes = n.attrs.ints("axes");
  if (rank < 1 || axes.size() != 1) return false;
  const int64_t a = axes[0] < 0 ? axes[0] + rank : axes[0];
  return a == rank - 1;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  Shape b;
  return broadcast_shapes(from, to, &b) && b == to;
}

struct Group {
  std::vector<size_t> members;  // node indices, ascending
  Shape loop;
  DType dtype = DType::f32;
  Phase phase = Phase::forward;
  bool closed = false;  // ends with a reduction
  bool alive = true;    // false once merged into another group
};

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g), nodes_(g.nodes()) {
    consumers_.resize(g.values().size());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (ValueId v : nodes_[i].inputs) consumers_[static_cast<size_t>(v)].push_back(i);
    }
    is_output_.assign(g.values().size(), false);
    for (const NamedValue& o : g.outputs()) is_output_[static_cast<size_t>(o.value)] = true;
    group_of_.assign(nodes_.size(), -1);
  }

  void group() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const Node& n = nodes_[i];
      if (n.outputs.size() != 1) continue;
      const TypedShape& out = g_.type(n.outputs[0]);
      if (!is_compute_dtype(out.dtype)) continue;
      const DType compute = compute_dtype(out.dtype);
      bool same_dtype = true;  // a cast only needs one compute dtype on both sides
      for (ValueId v : n.inputs) {
        const DType in = g_.type(v).dtype;
        same_dtype =
            same_dtype && (n.op == Op::cast ? compute_dtype(in) == compute : in == out.dtype);
      }
      if (!same_dtype) continue;
      if (is_member_op(n.op)) {
        std::vector<int> open;
        for (ValueId v : n.inputs) {
          const int gi = open_group(v, n.phase, compute);
          if (gi >= 0 && std::find(open.begin(), open.end(), gi) == open.end()) open.push_back(gi);
        }
        if (!open.empty() && try_join(open, i, out.shape)) continue;
        for (int gi : open) {
          if (open.size() > 1 && try_join({gi}, i, out.shape)) break;
        }
        if (group_of_[i] < 0) {
          groups_.push_back(Group{{i}, out.shape, compute, n.phase});
          group_of_[i] = static_cast<int>(groups_.size()) - 1;
        }
      } else if (n.op == Op::expand && op_def(n.op).has(kFusible)) {
        const int gi = open_group(n.inputs[0], n.phase, compute);
        if (gi >= 0) try_join({gi}, i, out.shape);
      } else if (is_last_axis_reduction(g_, n) && out.dtype == compute) {
        // (a reduction stores the compute dtype: autocast's reductions are f32)
        const int gi = open_group(n.inputs[0], n.phase, compute);
        if (gi >= 0 && groups_[static_cast<size_t>(gi)].loop == g_.type(n.inputs[0]).shape &&
            try_join({gi}, i, groups_[static_cast<size_t>(gi)].loop)) {
          groups_[static_cast<size_t>(gi)].closed = true;
        }
      }
    }
  }

  // Replaces every group of two or more members by one fused_pointwise node.
  bool rewrite(int64_t* fused_groups, int64_t* fused_members) {
    std::vector<Node> fused(nodes_.size());
    std::vector<bool> emit_fused(nodes_.size(), false), drop(nodes_.size(), false);
    for (Group& gr : groups_) {
      if (!gr.alive || gr.members.size() < 2) continue;
      Node f;
      if (!build(gr, &f)) continue;
      for (size_t m : gr.members) drop[m] = true;
      emit_fused[gr.members.back()] = true;
      fused[gr.members.back()] = std::move(f);
      ++*fused_groups;
      *fused_members += static_cast<int64_t>(gr.members.size());
    }
    if (*fused_groups == 0) return false;
    std::vector<Node> out;
    out.reserve(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (emit_fused[i]) {
        out.push_back(std::move(fused[i]));
      } else if (!drop[i]) {
        out.push_back(nodes_[i]);
      }
    }
    g_.set_nodes(std::move(out));
    return true;
  }

 private:
  // The open group producing v (same phase and dtype), or -1.
  int open_group(ValueId v, Phase phase, DType dtype) const {
    const NodeId p = g_.value(v).node;
    if (p < 0) return -1;
    const int gi = group_of_[static_cast<size_t>(p)];
    if (gi < 0) return -1;
    const Group& gr = groups_[static_cast<size_t>(gi)];
    return (gr.closed || gr.phase != phase || gr.dtype != dtype) ? -1 : gi;
  }

  bool in_union(size_t node, const std::vector<int>& gs, size_t joining) const {
    if (node == joining) return true;
    const int gi = group_of_[node];
    return gi >= 0 && std::find(gs.begin(), gs.end(), gi) != gs.end();
  }

  // Merges the groups `gs` and node i into gs[0] with loop shape `loop`, if the rules of the
  // header allow it.
  bool try_join(const std::vector<int>& gs, size_t i, const Shape& loop) {
    for (int gi : gs) {
      const Group& gr = groups_[static_cast<size_t>(gi)];
      if (!broadcasts_to(gr.loop, loop)) return false;
      const bool grows = !(gr.loop == loop);
      for (size_t m : gr.members) {
        for (ValueId v : nodes_[m].outputs) {
          if (grows && is_output_[static_cast<size_t>(v)]) return false;
          for (size_t c : consumers_[static_cast<size_t>(v)]) {
            const bool inside = in_union(c, gs, i);
            if (!inside && (c < i || grows)) return false;
          }
        }
      }
    }
    Group& into = groups_[static_cast<size_t>(gs[0])];
    for (size_t k = 1; k < gs.size(); ++k) {
      Group& other = groups_[static_cast<size_t>(gs[k])];
      for (size_t m : other.members) {
        into.members.push_back(m);
        group_of_[m] = gs[0];
      }
      other.members.clear();
      other.alive = false;
    }
    into.members.push_back(i);
    std::sort(into.members.begin(), into.members.end());
    into.loop = loop;
    into.phase = nodes_[i].phase;
    group_of_[i] = gs[0];
    return true;
  }

  // What a member reads as operand v: a member's value, a literal, or a (broadcast) load.
  struct Operand {
    enum Kind { member, literal, load } kind = load;
    ValueId value = kNoValue;  // member: the value; load: the loaded value
    double literal_value = 0;
  };
  Operand resolve(ValueId v, const std::set<size_t>& in_group, DType dtype) const {
    const NodeId p = g_.value(v).node;
    if (p >= 0 && in_group.count(static_cast<size_t>(p))) return {Operand::member, v, 0};
    if (p >= 0) {
      const Node& n = nodes_[static_cast<size_t>(p)];
      if (n.op == Op::constant && compute_dtype(n.attrs.dtype("dtype")) == dtype) {
        const double value = n.attrs.f("value");
        // A bf16 constant is a literal when bf16 holds it exactly (else it stays a load).
        const bool exact =
            n.attrs.dtype("dtype") != DType::bf16 ||
            static_cast<double>(bf16_to_f32(f32_to_bf16(static_cast<float>(value)))) == value;
        if (exact) return {Operand::literal, v, value};
      }
      // An expand is read as a broadcast load of its input, unless that input (or the expand)
      // is fused into another group: there it may live only inside the kernel (a group outputs
      // the expanded value, not the one before the expand, which CSE may have shared between
      // layers), so this group loads the expand's own value.
      if (n.op == Op::expand && !fused_elsewhere(static_cast<size_t>(p), in_group)) {
        const NodeId q = g_.value(n.inputs[0]).node;
        if (q < 0 || !fused_elsewhere(static_cast<size_t>(q), in_group))
          return resolve(n.inputs[0], in_group, dtype);
      }
    }
    return {Operand::load, v, 0};
  }

  // Whether node i is a member of another group of several nodes (one fused node replaces them).
  bool fused_elsewhere(size_t i, const std::set<size_t>& in_group) const {
    const int gi = group_of_[i];
    if (gi < 0 || in_group.count(i)) return false;
    const Group& gr = groups_[static_cast<size_t>(gi)];
    return gr.alive && gr.members.size() > 1;
  }

  // '1' per dim of `loop` where `s` (right-aligned) spans it, '0' where it broadcasts, '*' where
  // the loop dim is a concrete 1 (either). False when s does not broadcast to the loop.
  static bool full_mask(const Shape& s, const Shape& loop, std::string* mask) {
    const int r = loop.rank(), off = r - s.rank();
    if (off < 0) return false;
    mask->assign(static_cast<size_t>(r), '0');
    for (int d = 0; d < r; ++d) {
      const bool one = loop[d].is_concrete() && loop[d].value() == 1;
      if (one) {
        (*mask)[static_cast<size_t>(d)] = '*';
        continue;
      }
      if (d < off) continue;
      const Dim& sd = s[d - off];
      if (sd == loop[d]) {
        (*mask)[static_cast<size_t>(d)] = '1';
      } else if (!(sd.is_concrete() && sd.value() == 1)) {
        return false;
      }
    }
    return true;
  }

  // External loads of a group, in first-use order.
  std::vector<ValueId> external_loads(const Group& gr, const std::set<size_t>& in_group) const {
    std::vector<ValueId> loads;
    for (size_t m : gr.members) {
      for (ValueId v : nodes_[m].inputs) {
        const Operand o = resolve(v, in_group, gr.dtype);
        if (o.kind == Operand::load &&
            std::find(loads.begin(), loads.end(), o.value) == loads.end())
          loads.push_back(o.value);
      }
    }
    return loads;
  }

  // The kernel's loop groups and input masks: neighbouring loop dims that every input reads
  // alike merge; the reduced dim stays alone. False when a load does not broadcast to the loop.
  bool plan_loop(const std::vector<ValueId>& loads, const Shape& loop, bool reduce,
                 codegen::Kernel* k) const {
    const int r = loop.rank();
    std::vector<std::string> masks(loads.size());
    for (size_t i = 0; i < loads.size(); ++i) {
      if (!full_mask(g_.type(loads[i]).shape, loop, &masks[i])) return false;
    }
    std::vector<std::string> bits;  // per loop group: one char per input ('*' unset)
    for (int d = 0; d < r; ++d) {
      std::string col(loads.size(), '*');
      for (size_t i = 0; i < loads.size(); ++i) col[i] = masks[i][static_cast<size_t>(d)];
      const bool alone = reduce && d == r - 1;
      bool merged = false;
      if (!k->loop_groups.empty() && !alone) {
        std::string& prev = bits.back();
        bool same = true;
        for (size_t i = 0; i < col.size(); ++i)
          same = same && (col[i] == '*' || prev[i] == '*' || col[i] == prev[i]);
        if (same) {
          for (size_t i = 0; i < col.size(); ++i)
            if (prev[i] == '*') prev[i] = col[i];
          ++k->loop_groups.back();
          merged = true;
        }
      }
      if (!merged) {
        k->loop_groups.push_back(1);
        bits.push_back(col);
      }
    }
    if (k->loop_groups.empty()) {  // a scalar loop
      k->loop_groups.push_back(0);
      bits.push_back(std::string(loads.size(), '0'));
    }
    for (size_t i = 0; i < loads.size(); ++i) {
      codegen::KernelInput in{g_.type(loads[i]).dtype, std::string(k->loop_groups.size(), '0')};
      for (size_t l = 0; l < bits.size(); ++l) in.mask[l] = bits[l][i] == '1' ? '1' : '0';
      k->inputs.push_back(in);
    }
    return true;
  }

  // The kernel body being written: each member value's register, each load's.
  struct Body {
    const Group& gr;
    const std::set<size_t>& in_group;
    const std::vector<ValueId>& loads;
    codegen::Kernel& k;
    std::map<ValueId, int> reg;
    std::map<size_t, int> load_reg;
  };

  // The register holding operand v: a member's, or a new literal or load instruction.
  int operand(Body& b, ValueId v) const {
    const Operand o = resolve(v, b.in_group, b.gr.dtype);
    if (o.kind == Operand::member) return b.reg.at(o.value);
    codegen::Instr x;
    if (o.kind == Operand::literal) {
      x.op = Op::constant;
      x.value = o.literal_value;
    } else {
      const auto idx =
          static_cast<size_t>(std::find(b.loads.begin(), b.loads.end(), o.value) - b.loads.begin());
      if (auto it = b.load_reg.find(idx); it != b.load_reg.end()) return it->second;
      x.op = Op::input;
      x.input = static_cast<int>(idx);
      b.load_reg[idx] = static_cast<int>(b.k.body.size());
    }
    b.k.body.push_back(x);
    return static_cast<int>(b.k.body.size()) - 1;
  }

  // One member's instructions (none for an expand or a cast up to the compute dtype); its
  // FLOPs per element.
  double emit_member(Body& b, size_t m, bool reduce) const {
    const Node& n = nodes_[m];
    codegen::Kernel& k = b.k;
    if (n.op == Op::expand) {
      b.reg[n.outputs[0]] = operand(b, n.inputs[0]);
      return 0;
    }
    if (reduce && m == b.gr.members.back()) {
      k.reduce = n.op;
      k.reduce_arg = operand(b, n.inputs[0]);
      return 1;
    }
    const bool to_bf16 = g_.type(n.outputs[0]).dtype == DType::bf16;
    if (n.op == Op::cast && !to_bf16) {  // up to the compute dtype: the value itself
      b.reg[n.outputs[0]] = operand(b, n.inputs[0]);
      return 0;
    }
    codegen::Instr x;
    x.op = n.op;
    x.a = operand(b, n.inputs[0]);
    if (n.op == Op::cast) x.to = DType::bf16;
    if (n.inputs.size() > 1) x.b = operand(b, n.inputs[1]);
    if (n.op == Op::pow_scalar) x.value = n.attrs.f("exponent");
    k.body.push_back(x);
    if (to_bf16 && n.op != Op::cast) {
      // A bf16 op: computed in f32 and rounded once, as the eager kernels round its output.
      codegen::Instr round;
      round.op = Op::cast;
      round.a = static_cast<int>(k.body.size()) - 1;
      round.to = DType::bf16;
      k.body.push_back(round);
    }
    b.reg[n.outputs[0]] = static_cast<int>(k.body.size()) - 1;
    return 1;
  }

  // The kernel's outputs: members read outside the group or fetched by the caller, then the
  // reduction's. False when one is not of the loop's shape and compute dtype, or none is.
  bool collect_outputs(Body& b, bool reduce, std::vector<ValueId>* outs) const {
    for (size_t m : b.gr.members) {
      if (reduce && m == b.gr.members.back()) continue;
      const ValueId v = nodes_[m].outputs[0];
      bool outside = is_output_[static_cast<size_t>(v)];
      for (size_t c : consumers_[static_cast<size_t>(v)]) outside = outside || !b.in_group.count(c);
      if (!outside) continue;
      if (!(g_.type(v).shape == b.gr.loop) || compute_dtype(g_.type(v).dtype) != b.gr.dtype)
        return false;
      b.k.outputs.push_back(b.reg.at(v));
      b.k.output_dtypes.push_back(g_.type(v).dtype);
      outs->push_back(v);
    }
    if (reduce) outs->push_back(nodes_[b.gr.members.back()].outputs[0]);
    return !outs->empty();
  }

  // The fused_pointwise node of kernel `k` over the group's loop.
  static void fill_node(const Group& gr, const Node& last, bool reduce, const codegen::Kernel& k,
                        double flops, Node* out) {
    out->op = Op::fused_pointwise;
    out->scope = last.scope;
    out->phase = last.phase;
    out->attrs.set("kernel", k.to_text());
    out->attrs.set("shape", gr.loop);
    out->attrs.set("dtype", gr.dtype);
    out->attrs.set("outputs", static_cast<int64_t>(k.outputs.size()));
    if (k.mixed_storage()) {
      std::string dtypes;
      for (size_t o = 0; o < k.outputs.size(); ++o) {
        dtypes += (o > 0 ? " " : "") + std::string(dtype_name(k.output_dtype(static_cast<int>(o))));
      }
      out->attrs.set("out_dtypes", dtypes);
    }
    out->attrs.set("reduce", std::string(reduce ? op_name(last.op) : ""));
    out->attrs.set("keepdim", reduce && last.attrs.b_or("keepdim", false));
    out->attrs.set("flops", flops);
  }

  bool build(Group& gr, Node* out) {
    const std::set<size_t> in_group(gr.members.begin(), gr.members.end());
    const Node& last = nodes_[gr.members.back()];
    const bool reduce = is_last_axis_reduction(g_, last);
    const std::vector<ValueId> loads = external_loads(gr, in_group);
    codegen::Kernel k;
    k.dtype = gr.dtype;
    if (!plan_loop(loads, gr.loop, reduce, &k)) return false;
    if (reduce) {
      bool spans = false;
      for (const codegen::KernelInput& in : k.inputs) spans = spans || in.mask.back() == '1';
      if (!spans) {  // nothing to take the reduced length from: leave the reduction unfused
        group_of_[gr.members.back()] = -1;
        gr.members.pop_back();
        gr.closed = false;
        return gr.members.size() >= 2 && build(gr, out);
      }
    }
    Body b{gr, in_group, loads, k, {}, {}};
    double flops = 0;
    for (size_t m : gr.members) flops += emit_member(b, m, reduce);
    std::vector<ValueId> outs;
    if (!collect_outputs(b, reduce, &outs)) return false;
    out->inputs = loads;
    out->outputs = outs;
    fill_node(gr, last, reduce, k, flops, out);
    return true;
  }

  Graph& g_;
  const std::vector<Node> nodes_;  // the graph's nodes before the rewrite
  std::vector<std::vector<size_t>> consumers_;
  std::vector<bool> is_output_;
  std::vector<int> group_of_;
  std::vector<Group> groups_;
};

}  // namespace

StatusOr<bool> PointwiseFusionPass::run(Graph& g) {
  fused_groups_ = 0;
  fused_members_ = 0;
  Fuser f(g);
  f.group();
  return f.rewrite(&fused_groups_, &fused_members_);
}

}  // namespace lj
