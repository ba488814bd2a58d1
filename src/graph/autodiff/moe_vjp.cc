// VJP rules of the mixture-of-experts contractions. topk and moe_sort give integers and have no
// rule: the router's gradient flows through the one-hot mask models/moe.cc builds, and the
// dispatch through gather / scatter_add.
#include "graph/autodiff/vjp.h"
#include "graph/builder_moe.h"

namespace lj {

// y = grouped_matmul(x, w, g, tb): per group e, y_e = x_e w_e^T (tb) or x_e w_e.
//   tb:  dx_e = dy_e w_e     dw_e = dy_e^T x_e
//   !tb: dx_e = dy_e w_e^T   dw_e = x_e^T dy_e
Status vjp_grouped_matmul(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const bool tb = c.node.attrs.b("tb");
  const Val x = c.in[0], w = c.in[1], g = c.in[2];
  if (c.needs_grad[0]) c.din[0] = grouped_matmul(dy, w, g, !tb);
  if (c.needs_grad[1])
    c.din[1] = tb ? grouped_matmul_wgrad(dy, x, g) : grouped_matmul_wgrad(x, dy, g);
  return ok_status();
}

// y = grouped_matmul_wgrad(a, b, g): y_e = a_e^T b_e.  da_e = b_e dy_e^T, db_e = a_e dy_e.
Status vjp_grouped_matmul_wgrad(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const Val a = c.in[0], b = c.in[1], g = c.in[2];
  if (c.needs_grad[0]) c.din[0] = grouped_matmul(b, dy, g, /*tb=*/true);
  if (c.needs_grad[1]) c.din[1] = grouped_matmul(a, dy, g, /*tb=*/false);
  return ok_status();
}

// Expert parallelism's exchange: ep_combine inverts ep_dispatch over the same route (each row
// back where it came from), so each is the other's gradient. Padding rows past the received
// count get no gradient (ep_combine does not read them; ep_dispatch writes them zero).
Status vjp_ep_dispatch(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = ep_combine(dy, c.in[1], c.in[2], c.node.attrs.i("ranks"));
  return ok_status();
}

Status vjp_ep_combine(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = ep_dispatch(dy, c.in[1], c.in[2], c.node.attrs.i("ranks"));
  return ok_status();
}

}  // namespace lj
