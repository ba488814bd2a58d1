// VJP of `opaque`: the callback's own backward function, as another opaque node reading
// (x, dy). Whether the callback has one is known only at run time, when the kernel looks it up.
#include "graph/autodiff/vjp.h"

namespace lj {

Status vjp_opaque(VjpCtx& c) {
  if (c.node.attrs.b_or("backward", false)) {
    return invalid_argument("the backward of opaque callback '" + c.node.attrs.s("callback") +
                            "' is not differentiable");
  }
  if (!c.needs_grad[0] || !c.dout[0].valid()) return ok_status();
  c.din[0] = c.b.add1(Op::opaque, {c.in[0], c.dout[0]},
                      {{"callback", c.node.attrs.s("callback")}, {"backward", true}});
  return ok_status();
}

}  // namespace lj
