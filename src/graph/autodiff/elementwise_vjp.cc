// VJP rules of the elementwise ops. x is the input, y the output, dy the output's gradient
// (all of one shape for unary ops). Binary ops and where broadcast, so each input's gradient
// is summed back to that input's shape with sum_to.
#include "graph/autodiff/vjp.h"

namespace lj {

namespace {

// Runs `rule(x, y, dy)` for a unary op whose input needs a gradient.
template <class Rule>
Status unary_vjp(VjpCtx& c, Rule rule) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = rule(c.in[0], c.out[0], dy);
  return ok_status();
}

}  // namespace

Status vjp_neg(VjpCtx& c) {
  return unary_vjp(c, [](Val, Val, Val dy) { return -dy; });
}

// y = e^x: dx = dy * y.
Status vjp_exp(VjpCtx& c) {
  return unary_vjp(c, [](Val, Val y, Val dy) { return dy * y; });
}

// y = ln x: dx = dy / x.
Status vjp_log(VjpCtx& c) {
  return unary_vjp(c, [](Val x, Val, Val dy) { return dy / x; });
}

// y = x^(1/2): dx = dy * 0.5 / y.
Status vjp_sqrt(VjpCtx& c) {
  return unary_vjp(c, [](Val, Val y, Val dy) { return (dy * 0.5) / y; });
}

// y = x^(-1/2): dx = dy * -0.5 * x^(-3/2) = dy * -0.5 * y^3.
Status vjp_rsqrt(VjpCtx& c) {
  return unary_vjp(c, [](Val, Val y, Val dy) { return (dy * -0.5) * (square(y) * y); });
}

// y = 1/x: dx = -dy * y^2.
Status vjp_reciprocal(VjpCtx& c) {
  return unary_vjp(c, [](Val, Val y, Val dy) { return -(dy * square(y)); });
}

// y = x^2: dx = 2 * x * dy.
Status vjp_square(VjpCtx& c) {
  return unary_vjp(c, [](Val x, Val, Val dy) { return dy * (x * 2.0); });
}

// y = x * s, s = sigmoid(x): dx = dy * s * (1 + x * (1 - s)).
Status vjp_silu(VjpCtx& c) {
  return unary_vjp(c, [](Val x, Val, Val dy) {
    const Val s = sigmoid(x);
    return dy * (s * (1.0 + x * (1.0 - s)));
  });
}

// y = sigmoid(x): dx = dy * y * (1 - y).
Status vjp_sigmoid(VjpCtx& c) {
  return unary_vjp(c, [](Val, Val y, Val dy) { return dy * (y * (1.0 - y)); });
}

// y = tanh(x): dx = dy * (1 - y^2).
Status vjp_tanh(VjpCtx& c) {
  return unary_vjp(c, [](Val, Val y, Val dy) { return dy * (1.0 - square(y)); });
}

// y = x^p: dx = dy * p * x^(p-1). p = 0 gives no gradient (din stays invalid, i.e. zero);
// p = 1 and p = 2 avoid the pow.
Status vjp_pow_scalar(VjpCtx& c) {
  const double p = c.node.attrs.f("exponent");
  if (p == 0) return ok_status();
  return unary_vjp(c, [p](Val x, Val, Val dy) {
    if (p == 1) return dy;
    if (p == 2) return dy * (x * 2.0);
    return dy * (pow(x, p - 1) * p);
  });
}

// y = cast(x): dx = cast(dy) back to x's dtype (autodiff only asks when x is float).
Status vjp_cast(VjpCtx& c) {
  return unary_vjp(c, [](Val x, Val, Val dy) { return cast(dy, x.dtype()); });
}

// c = a + b: da = sum_to(dc), db = sum_to(dc).
Status vjp_add(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  if (c.needs_grad[0]) c.din[0] = sum_to(dy, c.in[0].shape());
  if (c.needs_grad[1]) c.din[1] = sum_to(dy, c.in[1].shape());
  return ok_status();
}

// c = a - b: da = sum_to(dc), db = -sum_to(dc) (negate after summing: fewer elements).
Status vjp_sub(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  if (c.needs_grad[0]) c.din[0] = sum_to(dy, c.in[0].shape());
  if (c.needs_grad[1]) c.din[1] = -sum_to(dy, c.in[1].shape());
  return ok_status();
}

// c = a * b: da = sum_to(dc * b), db = sum_to(dc * a).
Status vjp_mul(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const Val a = c.in[0];
  const Val b = c.in[1];
  if (c.needs_grad[0]) c.din[0] = sum_to(dy * b, a.shape());
  if (c.needs_grad[1]) c.din[1] = sum_to(dy * a, b.shape());
  return ok_status();
}

// c = a / b: da = sum_to(dc / b), db = sum_to(-dc * a / b^2) = -sum_to(dc * c / b).
Status vjp_div(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const Val a = c.in[0];
  const Val b = c.in[1];
  if (c.needs_grad[0]) c.din[0] = sum_to(dy / b, a.shape());
  if (c.needs_grad[1]) c.din[1] = -sum_to(dy * c.out[0] / b, b.shape());
  return ok_status();
}

// y = where(cond, a, b): da = sum_to(where(cond, dy, 0)), db = sum_to(where(cond, 0, dy)).
// cond (u8) gets no gradient.
Status vjp_where(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const Val cond = c.in[0];
  const Val zero = constant(c.b, 0.0, dy.dtype());  // () broadcasts
  if (c.needs_grad[1]) c.din[1] = sum_to(where(cond, dy, zero), c.in[1].shape());
  if (c.needs_grad[2]) c.din[2] = sum_to(where(cond, zero, dy), c.in[2].shape());
  return ok_status();
}

}  // namespace lj
