// VJP rules of the reductions. A reduction's gradient is dy reshaped to the keepdim shape
// (reduced dims set to 1) and broadcast back over the reduced dims.
#include "graph/autodiff/vjp.h"

namespace lj {

namespace {

// The reduced axes of a sum / mean / max node over an input of rank `rank`, normalized and
// ascending (attr axes empty: all of them).
std::vector<int64_t> reduced_axes(const Node& n, int rank) {
  const std::vector<int64_t>& axes = n.attrs.ints("axes");
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  std::vector<int64_t> out;
  for (int i = 0; i < rank; ++i) {
    if (reduced[static_cast<size_t>(i)]) out.push_back(i);
  }
  return out;
}

// x's shape with the reduced axes set to 1.
Shape keepdim_shape(const Shape& x, const std::vector<int64_t>& axes) {
  Shape s = x;
  for (int64_t a : axes) s[static_cast<int>(a)] = Dim(1);
  return s;
}

// dy (reduced shape, with or without keepdim) -> (keepdim shape).
Val to_keepdim(Val dy, const Shape& kshape) {
  return dy.shape() == kshape ? dy : reshape(dy, kshape);
}

}  // namespace

// y = sum(x, axes): dx = expand(dy, x.shape).
Status vjp_sum(VjpCtx& c) {
  const Val x = c.in[0];
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  const Shape kshape = keepdim_shape(x.shape(), reduced_axes(c.node, x.rank()));
  c.din[0] = expand(to_keepdim(dy, kshape), x.shape());
  return ok_status();
}

// y = mean(x, axes): dx = expand(dy / count, x.shape), count = product of the reduced dims.
// A symbolic count (mean over T) is computed in the graph as the sum of ones over the reduced
// dims alone (T elements, not the whole of x).
Status vjp_mean(VjpCtx& c) {
  const Val x = c.in[0];
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  const std::vector<int64_t> axes = reduced_axes(c.node, x.rank());
  const Shape kshape = keepdim_shape(x.shape(), axes);
  std::vector<Dim> reduced_dims;
  for (int64_t a : axes) reduced_dims.push_back(x.shape()[static_cast<int>(a)]);
  const Shape reduced(std::move(reduced_dims));
  const Dim count = reduced.numel();
  Val scaled;
  if (count.is_concrete()) {
    scaled = to_keepdim(dy, kshape) / static_cast<double>(count.value());
  } else {
    const Val n = sum(constant(c.b, 1.0, x.dtype(), reduced), {});  // ()
    scaled = to_keepdim(dy, kshape) / n;
  }
  c.din[0] = expand(scaled, x.shape());
  return ok_status();
}

// y = max(x, axes): the gradient flows to the elements equal to the max, split evenly among
// ties (as torch.amax): dx = mask * dy / count, mask = cast(eq(x, y), x.dtype),
// count = sum(mask, axes).
Status vjp_max(VjpCtx& c) {
  const Val x = c.in[0];
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  const std::vector<int64_t> axes = reduced_axes(c.node, x.rank());
  const Shape kshape = keepdim_shape(x.shape(), axes);
  const Val mask = cast(eq(x, to_keepdim(c.out[0], kshape)), x.dtype());  // x's shape
  const Val count = sum(mask, axes, /*keepdim=*/true);                    // kshape
  c.din[0] = mask * (to_keepdim(dy, kshape) / count);
  return ok_status();
}

// y = softmax(x, axis): dx = y * (dy - sum(dy * y, axis, keepdim)).
Status vjp_softmax(VjpCtx& c) {
  const Val y = c.out[0];
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  const int64_t axis = c.node.attrs.i("axis");
  c.din[0] = y * (dy - sum(dy * y, {axis}, /*keepdim=*/true));
  return ok_status();
}

// y = log_softmax(x, axis): dx = dy - exp(y) * sum(dy, axis, keepdim).
Status vjp_log_softmax(VjpCtx& c) {
  const Val y = c.out[0];
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  const int64_t axis = c.node.attrs.i("axis");
  c.din[0] = dy - exp(y) * sum(dy, {axis}, /*keepdim=*/true);
  return ok_status();
}

}  // namespace lj
