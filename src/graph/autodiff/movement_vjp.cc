// VJP rules of the data-movement ops: each gradient moves dy back to where its elements came
// from (reshape back, inverse permutation, zero padding for slice, slices for concat, a sum
// for expand's broadcast, scatter_add / gather for the embedding pair).
#include <algorithm>

#include "graph/autodiff/vjp.h"

namespace lj {

// y = reshape(x): dx = reshape(dy, x.shape).
Status vjp_reshape(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = reshape(dy, c.in[0].shape());
  return ok_status();
}

// y = permute(x, perm): dx = permute(dy, inverse(perm)), inverse[perm[i]] = i.
Status vjp_permute(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  const std::vector<int64_t>& perm = c.node.attrs.ints("perm");
  const auto rank = static_cast<int64_t>(perm.size());
  std::vector<int64_t> inverse(perm.size());
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t p = perm[static_cast<size_t>(i)];
    inverse[static_cast<size_t>(p < 0 ? p + rank : p)] = i;
  }
  c.din[0] = permute(dy, inverse);
  return ok_status();
}

// y = slice(x, axis, start, end): dx = concat(zeros (.., start, ..), dy, zeros (.., d - stop, ..))
// along axis, stop = min(end, d). A symbolic dim is only ever sliced whole, so dx = dy there.
Status vjp_slice(VjpCtx& c) {
  const Val dy = c.dout[0];
  const Val x = c.in[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  if (dy.shape() == x.shape()) {
    c.din[0] = dy;
    return ok_status();
  }
  const int axis = x.shape().norm_axis(static_cast<int>(c.node.attrs.i("axis")));
  const int64_t d = x.shape()[axis].value();  // concrete: the shapes differ
  const int64_t start = c.node.attrs.i("start");
  const int64_t stop = std::min(c.node.attrs.i("end"), d);
  std::vector<Val> parts;
  auto zeros = [&](int64_t n) {
    Shape s = x.shape();
    s[axis] = Dim(n);
    parts.push_back(constant(c.b, 0.0, x.dtype(), s));
  };
  if (start > 0) zeros(start);
  parts.push_back(dy);
  if (stop < d) zeros(d - stop);
  c.din[0] = concat(parts, axis);
  return ok_status();
}

// y = concat(xs, axis): dx_i = slice(dy, axis, offset_i, offset_i + d_i).
Status vjp_concat(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid()) return ok_status();
  const int axis = dy.shape().norm_axis(static_cast<int>(c.node.attrs.i("axis")));
  int64_t offset = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    const int64_t d = c.in[i].shape()[axis].value();  // concat dims are concrete
    if (c.needs_grad[i]) c.din[i] = slice(dy, axis, offset, offset + d);
    offset += d;
  }
  return ok_status();
}

// y = expand(x, shape): dx = sum_to(dy, x.shape) (sums the added and broadcast dims).
Status vjp_expand(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = sum_to(dy, c.in[0].shape());
  return ok_status();
}

// y = gather(table (V, C...), ids (N...)): dtable = scatter_add(ids, dy (N..., C...), (V, C...)).
Status vjp_gather(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = scatter_add(c.in[1], dy, c.in[0].shape());
  return ok_status();
}

// y = scatter_add(ids (N...), src (N..., C...)) -> (V, C...): dsrc = gather(dy, ids).
Status vjp_scatter_add(VjpCtx& c) {
  const Val dy = c.dout[0];
  if (!dy.valid() || !c.needs_grad[1]) return ok_status();
  c.din[1] = gather(dy, c.in[0]);
  return ok_status();
}

}  // namespace lj
