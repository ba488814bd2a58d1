// VJP rules of the fused ops of pattern fusion: rms_norm and add_rms_norm (one fused backward op,
// rms_norm_backward, which also adds the residual's gradient), swiglu (swiglu_backward), and rope,
// whose VJP is rope with the transpose rotation (rotate_half^T = -rotate_half).
//
// The saved rstd output is state for the backward, not a value a loss should read: a gradient on
// it is refused (as vjp_sdpa refuses one on lse) rather than dropped silently.
#include "graph/autodiff/vjp.h"
#include "graph/builder_fused.h"

namespace lj {
namespace {

Status refuse_rstd_gradient(const VjpCtx& c) {
  return unimplemented(std::string(op_name(c.node.op)) +
                           ": the loss depends on the rstd output, which has no gradient rule",
                       "compute the statistic with primitive ops if the loss needs it");
}

// HF rotate_half on the last dim: cat(-x2, x1).
Val rotate_half(Val x) {
  const int64_t d = x.shape().dim(-1).value();
  return concat({-slice(x, -1, d / 2, d), slice(x, -1, 0, d / 2)}, -1);
}

}  // namespace

// (y, rstd) = rms_norm(x, w): dx, dw = rms_norm_backward(dy, x, w, rstd).
Status vjp_rms_norm(VjpCtx& c) {
  if (c.dout[1].valid()) return refuse_rstd_gradient(c);
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const RmsNormGrads g = rms_norm_backward(dy, c.in[0], c.in[1], c.out[1]);
  if (c.needs_grad[0]) c.din[0] = g.dx;
  if (c.needs_grad[1]) c.din[1] = g.dw;
  return ok_status();
}

// (s, y, rstd) = add_rms_norm(x, r, w), s = x + r: ds = ds_direct + rms_norm's dx (one kernel,
// ds_direct passed as dres), dx = dr = ds, dw from the norm.
Status vjp_add_rms_norm(VjpCtx& c) {
  if (c.dout[2].valid()) return refuse_rstd_gradient(c);
  const Val ds_direct = c.dout[0];
  const Val dy = c.dout[1];
  Val ds = ds_direct;
  if (dy.valid()) {
    const RmsNormGrads g = rms_norm_backward(dy, c.out[0], c.in[2], c.out[2], ds_direct);
    ds = g.dx;
    if (c.needs_grad[2]) c.din[2] = g.dw;
  }
  if (!ds.valid()) return ok_status();
  if (c.needs_grad[0]) c.din[0] = ds;
  if (c.needs_grad[1]) c.din[1] = ds;
  return ok_status();
}

// out = silu(gate) * up: dgate, dup = swiglu_backward(dout, gate, up).
Status vjp_swiglu(VjpCtx& c) {
  const Val dout = c.dout[0];
  if (!dout.valid()) return ok_status();
  const SwigluGrads g = swiglu_backward(dout, c.in[0], c.in[1]);
  if (c.needs_grad[0]) c.din[0] = g.dgate;
  if (c.needs_grad[1]) c.din[1] = g.dup;
  return ok_status();
}

// out = silu(x[..., :F]) * x[..., F:]: dx = swiglu_packed_backward(dout, x).
Status vjp_swiglu_packed(VjpCtx& c) {
  const Val dout = c.dout[0];
  if (!dout.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = swiglu_packed_backward(dout, c.in[0]);
  return ok_status();
}

// y = x * cos + R(x) * sin with R = rotate_half, an orthogonal map with R^T = -R:
//   dx = dy * cos + R^T(dy * sin)         = rope(dy, cos, sin, inverse)
//   dcos = sum_to(dy * x), dsin = sum_to(dy * R(x)).
// The inverse, y = x * cos + R^T(x * sin), has dx = rope(dy, cos, sin), dcos as above and
// dsin = sum_to(x * R(dy)). cos and sin are usually data (the model's tables), so their
// gradients are built from primitives only when asked for.
Status vjp_rope(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const Val x = c.in[0], cos = c.in[1], sin = c.in[2];
  const bool inverse = c.node.attrs.b("inverse");
  if (c.needs_grad[0]) c.din[0] = rope(dy, cos, sin, !inverse);
  if (c.needs_grad[1]) c.din[1] = sum_to(dy * x, cos.shape());
  if (c.needs_grad[2])
    c.din[2] = sum_to(inverse ? x * rotate_half(dy) : dy * rotate_half(x), sin.shape());
  return ok_status();
}

}  // namespace lj
