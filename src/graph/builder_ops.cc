// The builder's op functions: each one names its op and attributes; shapes are checked by the
// op table's inference rule inside Builder::add.
#include "graph/builder.h"

namespace lj {
namespace {

Val unary(Op op, Val x, Attrs attrs = {}) {
  if (!x.valid()) return {};
  return x.b->add1(op, {x}, std::move(attrs));
}

Val binary(Op op, Val a, Val b) {
  if (!a.valid() || !b.valid()) return {};
  return a.b->add1(op, {a, b});
}

Val scalar_like(Val x, double s) {
  if (!x.valid()) return {};
  return constant(*x.b, s, x.dtype());
}

Attrs reduce_attrs(std::vector<int64_t> axes, bool keepdim) {
  return Attrs{{"axes", std::move(axes)}, {"keepdim", keepdim}};
}

}  // namespace

Val constant(Builder& b, double value, DType dtype, Shape shape) {
  return b.add1(Op::constant, {},
                {{"value", value}, {"dtype", dtype}, {"shape", std::move(shape)}});
}

Val iota(Builder& b, Shape shape, int axis, DType dtype) {
  return b.add1(Op::iota, {},
                {{"shape", std::move(shape)}, {"axis", int64_t{axis}}, {"dtype", dtype}});
}

Val random_normal(Builder& b, Shape shape, DType dtype, double mean, double std, uint64_t seed) {
  return b.add1(Op::random_normal, {},
                {{"shape", std::move(shape)},
                 {"dtype", dtype},
                 {"mean", mean},
                 {"std", std},
                 {"seed", static_cast<int64_t>(seed)}});
}

Val random_uniform(Builder& b, Shape shape, DType dtype, double low, double high, uint64_t seed) {
  return b.add1(Op::random_uniform, {},
                {{"shape", std::move(shape)},
                 {"dtype", dtype},
                 {"low", low},
                 {"high", high},
                 {"seed", static_cast<int64_t>(seed)}});
}

Val neg(Val x) {
  return unary(Op::neg, x);
}
Val exp(Val x) {
  return unary(Op::exp, x);
}
Val log(Val x) {
  return unary(Op::log, x);
}
Val sqrt(Val x) {
  return unary(Op::sqrt, x);
}
Val rsqrt(Val x) {
  return unary(Op::rsqrt, x);
}
Val reciprocal(Val x) {
  return unary(Op::reciprocal, x);
}
Val square(Val x) {
  return unary(Op::square, x);
}
Val silu(Val x) {
  return unary(Op::silu, x);
}
Val sigmoid(Val x) {
  return unary(Op::sigmoid, x);
}
Val tanh(Val x) {
  return unary(Op::tanh, x);
}
Val pow(Val x, double exponent) {
  return unary(Op::pow_scalar, x, {{"exponent", exponent}});
}
Val cast(Val x, DType dtype) {
  return unary(Op::cast, x, {{"dtype", dtype}});
}

Val add(Val a, Val b) {
  return binary(Op::add, a, b);
}
Val sub(Val a, Val b) {
  return binary(Op::sub, a, b);
}
Val mul(Val a, Val b) {
  return binary(Op::mul, a, b);
}
Val div(Val a, Val b) {
  return binary(Op::div, a, b);
}
Val eq(Val a, Val b) {
  return binary(Op::eq, a, b);
}
Val lt(Val a, Val b) {
  return binary(Op::lt, a, b);
}
Val gt(Val a, Val b) {
  return binary(Op::gt, a, b);
}

Val where(Val cond, Val a, Val b) {
  if (!cond.valid() || !a.valid() || !b.valid()) return {};
  return cond.b->add1(Op::where, {cond, a, b});
}

Val operator+(Val a, Val b) {
  return add(a, b);
}
Val operator-(Val a, Val b) {
  return sub(a, b);
}
Val operator*(Val a, Val b) {
  return mul(a, b);
}
Val operator/(Val a, Val b) {
  return div(a, b);
}
Val operator-(Val a) {
  return neg(a);
}
Val operator+(Val a, double s) {
  return add(a, scalar_like(a, s));
}
Val operator-(Val a, double s) {
  return sub(a, scalar_like(a, s));
}
Val operator*(Val a, double s) {
  return mul(a, scalar_like(a, s));
}
Val operator/(Val a, double s) {
  return div(a, scalar_like(a, s));
}
Val operator+(double s, Val a) {
  return add(scalar_like(a, s), a);
}
Val operator-(double s, Val a) {
  return sub(scalar_like(a, s), a);
}
Val operator*(double s, Val a) {
  return mul(scalar_like(a, s), a);
}
Val operator/(double s, Val a) {
  return div(scalar_like(a, s), a);
}

Val sum(Val x, std::vector<int64_t> axes, bool keepdim) {
  return unary(Op::sum, x, reduce_attrs(std::move(axes), keepdim));
}
Val mean(Val x, std::vector<int64_t> axes, bool keepdim) {
  return unary(Op::mean, x, reduce_attrs(std::move(axes), keepdim));
}
Val max(Val x, std::vector<int64_t> axes, bool keepdim) {
  return unary(Op::max, x, reduce_attrs(std::move(axes), keepdim));
}
Val softmax(Val x, int axis) {
  return unary(Op::softmax, x, {{"axis", int64_t{axis}}});
}
Val log_softmax(Val x, int axis) {
  return unary(Op::log_softmax, x, {{"axis", int64_t{axis}}});
}

Val matmul(Val a, Val b, bool ta, bool tb) {
  if (!a.valid() || !b.valid()) return {};
  return a.b->add1(Op::matmul, {a, b}, {{"ta", ta}, {"tb", tb}});
}

Val reshape(Val x, Shape shape) {
  return unary(Op::reshape, x, {{"shape", std::move(shape)}});
}
Val permute(Val x, std::vector<int64_t> perm) {
  return unary(Op::permute, x, {{"perm", std::move(perm)}});
}

Val transpose(Val x, int axis0, int axis1) {
  if (!x.valid()) return {};
  const int r = x.rank();
  const int a0 = axis0 < 0 ? axis0 + r : axis0;
  const int a1 = axis1 < 0 ? axis1 + r : axis1;
  if (a0 < 0 || a0 >= r || a1 < 0 || a1 >= r) {
    x.b->fail(invalid_argument("transpose: axes " + std::to_string(axis0) + ", " +
                               std::to_string(axis1) + " out of range for " +
                               x.type().to_string()));
    return {};
  }
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(a0)], perm[static_cast<size_t>(a1)]);
  return permute(x, perm);
}

Val slice(Val x, int axis, int64_t start, int64_t end) {
  return unary(Op::slice, x, {{"axis", int64_t{axis}}, {"start", start}, {"end", end}});
}

Val concat(const std::vector<Val>& xs, int axis) {
  if (xs.empty()) return {};
  for (const Val& v : xs) {
    if (!v.valid()) return {};
  }
  return xs[0].b->add1(Op::concat, xs, {{"axis", int64_t{axis}}});
}

Val expand(Val x, Shape shape) {
  return unary(Op::expand, x, {{"shape", std::move(shape)}});
}
Val gather(Val table, Val ids) {
  return binary(Op::gather, table, ids);
}

Val scatter_add(Val ids, Val src, Shape out_shape) {
  if (!ids.valid() || !src.valid()) return {};
  return ids.b->add1(Op::scatter_add, {ids, src}, {{"shape", std::move(out_shape)}});
}

Val sum_to(Val g, Shape target) {  // by value: `target` may point into the graph, which grows below
  if (!g.valid()) return {};
  if (g.shape() == target) return g;
  const int r = g.rank();
  const int lead = r - target.rank();
  if (lead < 0) {
    g.b->fail(invalid_argument("sum_to: " + g.type().to_string() + " has fewer dims than " +
                               target.to_string()));
    return {};
  }
  std::vector<int64_t> axes;
  for (int i = 0; i < r; ++i) {
    if (i < lead || (target[i - lead] == Dim(1) && g.shape()[i] != Dim(1))) axes.push_back(i);
  }
  Val s = sum(g, axes, /*keepdim=*/true);
  return reshape(s, target);
}

Val cross_entropy(Val logits, Val labels, int64_t ignore_index) {
  if (!logits.valid() || !labels.valid()) return {};
  return logits.b->add1(Op::cross_entropy, {logits, labels}, {{"ignore_index", ignore_index}});
}

SdpaResult sdpa(Val q, Val k, Val v, bool causal, double scale, int64_t window) {
  if (!q.valid() || !k.valid() || !v.valid()) return {};
  Attrs attrs{{"causal", causal}, {"scale", scale}};
  if (window != 0) attrs.set("window", window);
  auto outs = q.b->add(Op::sdpa, {q, k, v}, attrs);
  return SdpaResult{outs[0], outs[1]};
}

Val opaque(Val x, const std::string& callback) {
  return unary(Op::opaque, x, {{"callback", callback}});
}

Val matmul_add(Val a, Val b, Val c, bool ta, bool tb) {
  if (!a.valid() || !b.valid() || !c.valid()) return {};
  return a.b->add1(Op::matmul_add, {a, b, c}, {{"ta", ta}, {"tb", tb}});
}

LinearCrossEntropyResult linear_cross_entropy(Val x, Val w, Val labels, int64_t ignore_index,
                                              int64_t chunk) {
  if (!x.valid() || !w.valid() || !labels.valid()) return {};
  auto outs = x.b->add(Op::linear_cross_entropy, {x, w, labels},
                       {{"ignore_index", ignore_index}, {"chunk", chunk}});
  return LinearCrossEntropyResult{outs[0], outs[1], outs[2]};
}

}  // namespace lj
