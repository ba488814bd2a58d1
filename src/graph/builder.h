// The builder: model code reads as math (`x = matmul(x, w, false, true); y = x + r;`).
//
// Errors are sticky, as in XLA's builder: the first op whose shapes do not fit records a Status
// naming the op and the shapes, and returns an invalid Val; every later op given an invalid Val
// returns an invalid Val without adding nodes. Check `builder.status()` once at the end. Nothing
// aborts on bad shapes.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace lj {

class Builder;

// A value under construction: an id in the builder's graph. Cheap to copy.
struct Val {
  ValueId id = kNoValue;
  Builder* b = nullptr;

  bool valid() const { return id != kNoValue && b != nullptr; }
  const TypedShape& type() const;
  const Shape& shape() const { return type().shape; }
  DType dtype() const { return type().dtype; }
  int rank() const { return shape().rank(); }
};

class Builder {
 public:
  // Appends to `g`, which must outlive the builder.
  explicit Builder(Graph* g) : g_(g) {}

  Val input(const std::string& name, DType dtype, Shape shape) {
    return add_input(name, dtype, std::move(shape), Role::data);
  }
  Val param(const std::string& name, DType dtype, Shape shape) {
    return add_input(name, dtype, std::move(shape), Role::param);
  }
  Val state(const std::string& name, DType dtype, Shape shape) {
    return add_input(name, dtype, std::move(shape), Role::state);
  }
  void output(const std::string& name, Val v);

  // Adds a node after inferring its output types; on error records it and returns invalid Vals.
  std::vector<Val> add(Op op, const std::vector<Val>& inputs, Attrs attrs = {});
  Val add1(Op op, const std::vector<Val>& inputs, Attrs attrs = {}) {
    return add(op, inputs, std::move(attrs))[0];
  }

  // Wraps an existing value id.
  Val val(ValueId id) { return Val{id, this}; }

  // Scope names nest with '.': push_scope("model"), push_scope("layers.0") -> "model.layers.0".
  void push_scope(const std::string& name);
  void pop_scope();
  const std::string& scope() const { return scope_; }
  // Sets the scope outright (autodiff copies the forward node's scope to its backward nodes).
  void set_scope(std::string scope) { scope_ = std::move(scope); }
  void set_phase(Phase p) { phase_ = p; }
  Phase phase() const { return phase_; }

  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Records an error (the first one wins) for checks made outside the op table.
  void fail(Status s);

  Graph& graph() { return *g_; }

 private:
  Val add_input(const std::string& name, DType dtype, Shape shape, Role role);

  Graph* g_;
  std::string scope_;
  std::vector<size_t> scope_marks_;
  Phase phase_ = Phase::forward;
  Status status_;
};

// RAII scope: `ScopeGuard s(b, "mlp");`
class ScopeGuard {
 public:
  ScopeGuard(Builder& b, const std::string& name) : b_(b) { b_.push_scope(name); }
  ~ScopeGuard() { b_.pop_scope(); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Builder& b_;
};

// ---- Sources ----
Val constant(Builder& b, double value, DType dtype, Shape shape = {});
Val iota(Builder& b, Shape shape, int axis, DType dtype);
Val random_normal(Builder& b, Shape shape, DType dtype, double mean, double std, uint64_t seed);
Val random_uniform(Builder& b, Shape shape, DType dtype, double low, double high, uint64_t seed);

// ---- Elementwise ----
Val neg(Val x);
Val exp(Val x);
Val log(Val x);
Val sqrt(Val x);
Val rsqrt(Val x);
Val reciprocal(Val x);
Val square(Val x);
Val silu(Val x);
Val sigmoid(Val x);
Val tanh(Val x);
Val pow(Val x, double exponent);
Val cast(Val x, DType dtype);
Val add(Val a, Val b);
Val sub(Val a, Val b);
Val mul(Val a, Val b);
Val div(Val a, Val b);
Val eq(Val a, Val b);
Val lt(Val a, Val b);
Val gt(Val a, Val b);
Val where(Val cond, Val a, Val b);
// A scalar becomes a constant of x's dtype with shape () and broadcasts.
Val operator+(Val a, Val b);
Val operator-(Val a, Val b);
Val operator*(Val a, Val b);
Val operator/(Val a, Val b);
Val operator-(Val a);
Val operator+(Val a, double s);
Val operator-(Val a, double s);
Val operator*(Val a, double s);
Val operator/(Val a, double s);
Val operator+(double s, Val a);
Val operator-(double s, Val a);
Val operator*(double s, Val a);
Val operator/(double s, Val a);

// ---- Reductions (axes may be negative; empty axes reduce everything) ----
Val sum(Val x, std::vector<int64_t> axes, bool keepdim = false);
Val mean(Val x, std::vector<int64_t> axes, bool keepdim = false);
Val max(Val x, std::vector<int64_t> axes, bool keepdim = false);
Val softmax(Val x, int axis = -1);
Val log_softmax(Val x, int axis = -1);

// ---- Contraction ----
Val matmul(Val a, Val b, bool ta = false, bool tb = false);

// ---- Data movement ----
Val reshape(Val x, Shape shape);
Val permute(Val x, std::vector<int64_t> perm);
Val transpose(Val x, int axis0, int axis1);
Val slice(Val x, int axis, int64_t start, int64_t end);
Val concat(const std::vector<Val>& xs, int axis);
Val expand(Val x, Shape shape);

// A host callback registered at run time under `callback` (backends/host_callback.h): y has
// x's type. A graph break: compiled regions end before it and start after it.
Val opaque(Val x, const std::string& callback);
Val gather(Val table, Val ids);
Val scatter_add(Val ids, Val src, Shape out_shape);
// Sums g over its broadcast dims so it has `target`'s shape (the VJP of broadcasting).
Val sum_to(Val g, Shape target);

// ---- Loss and attention ----
Val cross_entropy(Val logits, Val labels, int64_t ignore_index = -100);
struct SdpaResult {
  Val out;  // (B, H, T, D)
  Val lse;  // (B, H, T), q's dtype (f32 for 16-bit q): log-sum-exp of each score row, saved
            // for the backward pass
};
// scale <= 0 means 1/sqrt(D). window > 0 (causal only): query i sees keys i - window < j <= i
// (Mistral's sliding window); 0 adds no attribute.
SdpaResult sdpa(Val q, Val k, Val v, bool causal = true, double scale = 0.0, int64_t window = 0);

// ---- Fused ops (made by passes/pattern_fusion; see graph/ops.def) ----
// matmul(a, b, ta, tb) + c, c with the product's type.
Val matmul_add(Val a, Val b, Val c, bool ta = false, bool tb = false);
struct LinearCrossEntropyResult {
  Val loss;    // ()
  Val dx, dw;  // d(loss)/dx (N, C), d(loss)/dw (V, C): made by the forward, read by the VJP
};
// cross_entropy(matmul(x (N, C), w (V, C), tb=true), labels (N)) without the (N, V) logits;
// chunk: rows per chunk (0: the kernel picks).
LinearCrossEntropyResult linear_cross_entropy(Val x, Val w, Val labels, int64_t ignore_index = -100,
                                              int64_t chunk = 0);

}  // namespace lj
