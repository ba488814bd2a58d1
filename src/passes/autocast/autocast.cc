#include "passes/autocast/autocast.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "graph/op.h"

namespace lj {
namespace {

using P = CastPolicy;

// clang-format off
constexpr AutocastRule kAutocastRules[] = {
    // Contractions and attention: the FLOPs. bf16 operands, f32 accumulation inside the kernel.
    {Op::matmul,               P::low,    "GEMM on bf16 operands (oneDNN, AMX / AVX512_BF16)"},
    {Op::matmul_add,           P::low,    "GEMM with the residual add as epilogue, bf16"},
    {Op::grouped_matmul,       P::low,    "the experts' GEMMs, as matmul"},
    {Op::grouped_matmul_wgrad, P::low,    "the experts' weight gradients, as matmul's"},
    {Op::ep_dispatch,          P::follow, "the routed rows travel as they are (one process's gather)"},
    {Op::ep_combine,           P::follow, "as ep_dispatch: bf16 rows back, as one process keeps them"},
    {Op::topk,                 P::keep,   "indices of the router's probabilities (softmax: f32)"},
    {Op::sdpa,                 P::low,    "bf16 q, k, v; the softmax inside runs in f32"},
    // Losses and softmax: f32, as torch.autocast and DeepSpeed keep them.
    {Op::cross_entropy,        P::keep,   "bf16 logits; the kernel's softmax and the loss are f32"},
    {Op::linear_cross_entropy, P::low,    "bf16 GEMMs; the kernel's softmax, loss and dw sum are f32"},
    {Op::softmax,              P::f32,    "exp of large logits overflows bf16's precision"},
    {Op::log_softmax,          P::f32,    "as softmax"},
    // Reductions: f32 sums (a bf16 mean of C values loses log2(C) bits).
    {Op::sum,                  P::f32,    "accumulate in f32"},
    {Op::mean,                 P::f32,    "accumulate in f32"},
    {Op::max,                  P::f32,    "reductions in f32"},
    // rms_norm's statistics in primitive form (models/llama.cc: square -> mean -> rsqrt): the
    // square is only ever the norm's x^2, so it runs in f32 and its mean, +eps and rsqrt follow.
    {Op::square,               P::f32,    "rms_norm statistics in f32"},
    // Elementwise math between the GEMMs: follow the inputs (bf16 activations stay bf16).
    {Op::neg,                  P::follow, "elementwise"},
    {Op::exp,                  P::follow, "elementwise"},
    {Op::log,                  P::follow, "elementwise"},
    {Op::sqrt,                 P::follow, "elementwise"},
    {Op::rsqrt,                P::follow, "elementwise"},
    {Op::reciprocal,           P::follow, "elementwise"},
    {Op::silu,                 P::follow, "elementwise"},
    {Op::sigmoid,              P::follow, "elementwise"},
    {Op::tanh,                 P::follow, "elementwise"},
    {Op::pow_scalar,           P::follow, "elementwise"},
    {Op::add,                  P::follow, "elementwise (the residual stream is bf16)"},
    {Op::sub,                  P::follow, "elementwise"},
    {Op::mul,                  P::follow, "elementwise (RoPE's x * cos: cos is cast, as HF does)"},
    {Op::div,                  P::follow, "elementwise"},
    {Op::eq,                   P::follow, "operands of one dtype"},
    {Op::lt,                   P::follow, "operands of one dtype"},
    {Op::gt,                   P::follow, "operands of one dtype"},
    {Op::where,                P::follow, "a and b of one dtype"},
    {Op::concat,               P::follow, "parts of one dtype"},
    // Fused ops from pattern fusion: in x's dtype, statistics in f32 inside the kernels.
    {Op::rms_norm,             P::follow, "bf16 in and out, f32 statistics in the kernel"},
    {Op::add_rms_norm,         P::follow, "bf16 in and out, f32 statistics in the kernel"},
    {Op::swiglu,               P::follow, "elementwise"},
    {Op::swiglu_packed,        P::follow, "elementwise, as swiglu"},
    {Op::rope,                 P::follow, "elementwise; cos and sin are cast to x's dtype"},
    // The embedding reads the f32 table (its scatter_add gradient stays f32); its rows go bf16.
    {Op::gather,               P::low_output, "embedding output in bf16"},
};
// clang-format on

bool is_low(DType t) {
  return t == DType::bf16 || t == DType::f16;
}

class Rewrite {
 public:
  Rewrite(Graph& g, DType low) : g_(g), low_(low), cur_(g.values().size()) {
    for (size_t v = 0; v < cur_.size(); ++v) cur_[v] = static_cast<ValueId>(v);
  }

  StatusOr<bool> run() {
    std::vector<bool> is_output(g_.values().size(), false);
    for (const NamedValue& o : g_.outputs()) is_output[static_cast<size_t>(o.value)] = true;
    const size_t n_nodes = g_.nodes().size();
    for (size_t i = 0; i < n_nodes; ++i) {
      Node n = g_.nodes()[i];  // a copy: add_node grows the list under us
      for (ValueId& v : n.inputs) v = cur_[static_cast<size_t>(v)];
      const CastPolicy policy = autocast_policy(n.op);
      LJ_RETURN_IF_ERROR(cast_inputs(n, policy));
      // Re-infer: the inputs' dtypes may have changed.
      std::vector<TypedShape> in_types;
      for (ValueId v : n.inputs) in_types.push_back(g_.type(v));
      std::vector<TypedShape> out_types;
      const OpDef& def = op_def(n.op);
      if (n.op == Op::input) {
        for (ValueId v : n.outputs) out_types.push_back(g_.type(v));
      } else {
        LJ_RETURN_IF_ERROR(def.infer(InferCtx{def, in_types, n.attrs}, &out_types));
      }
      bool same = out_types.size() == n.outputs.size();
      for (size_t k = 0; same && k < out_types.size(); ++k) {
        same = out_types[k] == g_.type(n.outputs[k]);
      }
      if (same) {
        nodes_.push_back(n);
      } else {
        const NodeId id = g_.add_node(n.op, n.inputs, n.attrs, out_types, n.scope, n.phase);
        const Node fresh = g_.nodes()[static_cast<size_t>(id)];
        nodes_.push_back(fresh);
        ++retyped_;
        for (size_t k = 0; k < n.outputs.size(); ++k) {
          const ValueId old = n.outputs[k];
          cur_[static_cast<size_t>(old)] = fresh.outputs[k];
          // A graph output is produced again, in its old type, under its old id.
          if (is_output[static_cast<size_t>(old)]) {
            Node back;
            back.op = Op::cast;
            back.inputs = {fresh.outputs[k]};
            back.outputs = {old};
            back.attrs = Attrs{{"dtype", g_.type(old).dtype}};
            back.scope = n.scope;
            back.phase = n.phase;
            nodes_.push_back(std::move(back));
            ++casts_;
          }
        }
      }
      if (policy == CastPolicy::low_output) {
        // Readers after this node see a low copy; graph outputs keep the f32 value.
        for (ValueId out : n.outputs) {
          const ValueId now = cur_[static_cast<size_t>(out)];
          if (g_.type(now).dtype == DType::f32) cur_[static_cast<size_t>(out)] = cast(now, low_, n);
        }
      }
    }
    if (casts_ == 0 && retyped_ == 0) return false;
    g_.set_nodes(std::move(nodes_));
    LJ_LOG(debug) << "autocast: " << casts_ << " cast(s), " << retyped_ << " node(s) retyped";
    return true;
  }

 private:
  // Casts n's float inputs as `policy` asks (n.inputs are rewired to the casts).
  Status cast_inputs(Node& n, CastPolicy policy) {
    auto is_f32 = [&](ValueId v) { return g_.type(v).dtype == DType::f32; };
    auto is_lo = [&](ValueId v) { return is_low(g_.type(v).dtype); };
    switch (policy) {
      case CastPolicy::keep:
      case CastPolicy::low_output:
        return ok_status();
      case CastPolicy::low:
        for (ValueId& v : n.inputs) {
          if (is_f32(v)) v = cast(v, low_, n);
        }
        return ok_status();
      case CastPolicy::f32:
        for (ValueId& v : n.inputs) {
          if (is_lo(v)) v = cast(v, DType::f32, n);
        }
        return ok_status();
      case CastPolicy::follow: {
        bool any_low = false;
        for (ValueId v : n.inputs) any_low = any_low || is_lo(v);
        if (!any_low) return ok_status();
        for (ValueId& v : n.inputs) {
          if (is_f32(v)) v = cast(v, low_, n);
        }
        return ok_status();
      }
    }
    return ok_status();
  }

  // A cast of v to `to` placed before `reader` (one per value and dtype: later readers share it).
  ValueId cast(ValueId v, DType to, const Node& reader) {
    const auto key = std::make_pair(v, to);
    if (auto it = made_.find(key); it != made_.end()) return it->second;
    const NodeId id = g_.add_node(Op::cast, {v}, Attrs{{"dtype", to}},
                                  {TypedShape{to, g_.type(v).shape}}, reader.scope, reader.phase);
    const Node& c = g_.nodes()[static_cast<size_t>(id)];
    nodes_.push_back(c);
    ++casts_;
    made_.emplace(key, c.outputs[0]);
    return c.outputs[0];
  }

  Graph& g_;
  DType low_;
  std::vector<ValueId> cur_;  // per original value: the value its readers read now
  std::vector<Node> nodes_;   // the rewritten node list
  std::map<std::pair<ValueId, DType>, ValueId> made_;
  int casts_ = 0;
  int retyped_ = 0;
};

}  // namespace

const char* cast_policy_name(CastPolicy p) {
  switch (p) {
    case CastPolicy::keep:
      return "keep";
    case CastPolicy::low:
      return "low";
    case CastPolicy::f32:
      return "f32";
    case CastPolicy::follow:
      return "follow";
    case CastPolicy::low_output:
      return "low_output";
  }
  return "?";
}

std::span<const AutocastRule> autocast_rules() {
  return kAutocastRules;
}

CastPolicy autocast_policy(Op op) {
  static const std::vector<CastPolicy> by_op = [] {
    std::vector<CastPolicy> t(kNumOps, CastPolicy::keep);
    for (const AutocastRule& r : kAutocastRules) t[static_cast<size_t>(r.op)] = r.policy;
    return t;
  }();
  return by_op[static_cast<size_t>(op)];
}

AutocastPass::AutocastPass(DType low) : low_(low) {
  LJ_CHECK(is_low(low)) << "autocast's low dtype is bf16 or f16, not " << dtype_name(low);
}

StatusOr<bool> AutocastPass::run(Graph& g) {
  return Rewrite(g, low_).run();
}

std::unique_ptr<Pass> make_autocast_pass(DType low) {
  return std::make_unique<AutocastPass>(low);
}

}  // namespace lj
