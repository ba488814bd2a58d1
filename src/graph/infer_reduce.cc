// Shape inference for reductions: sum, mean, max over attr axes (may be negative; empty = all,
// each axis at most once) with keepdim, and softmax / log_softmax along one axis. All need a
// float input.
#include <algorithm>

#include "graph/infer_util.h"

namespace lj {

// sum, mean, max: x (...) -> x's dims without the reduced axes (or with 1 there, keepdim).
Status infer_reduce(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  const Shape& x = c.in[0].shape;
  const std::vector<int64_t>& axes = c.attrs.ints("axes");
  const bool keepdim = c.attrs.b("keepdim");
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), axes.empty());
  for (int64_t a : axes) {
    int axis = 0;
    if (!infer::norm_axis(a, x.rank(), &axis)) {
      return shape_error(c, "axis " + std::to_string(a) + " is out of range");
    }
    if (reduced[static_cast<size_t>(axis)]) {
      return shape_error(c, "axis " + std::to_string(a) + " is listed twice");
    }
    reduced[static_cast<size_t>(axis)] = true;
  }
  std::vector<Dim> dims;
  for (int i = 0; i < x.rank(); ++i) {
    if (!reduced[static_cast<size_t>(i)]) {
      dims.push_back(x[i]);
    } else if (keepdim) {
      dims.emplace_back(1);
    }
  }
  out->assign(1, TypedShape{c.in[0].dtype, Shape(std::move(dims))});
  return ok_status();
}

// softmax, log_softmax: x (...) -> (...) along attr axis.
Status infer_softmax(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  int axis = 0;
  if (!infer::norm_axis(c.attrs.i("axis"), c.in[0].shape.rank(), &axis)) {
    return shape_error(c, "axis " + std::to_string(c.attrs.i("axis")) + " is out of range");
  }
  out->assign(1, c.in[0]);
  return ok_status();
}

}  // namespace lj
