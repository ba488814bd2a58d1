// Shape inference for source ops (no inputs): `input` reads the type its builder recorded in
// attrs {dtype, shape}; constant, iota and random_* read {dtype, shape} and their own attrs.
#include "graph/infer_util.h"

namespace lj {

Status infer_input(const InferCtx& c, std::vector<TypedShape>* out) {
  if (!c.attrs.has("dtype") || !c.attrs.has("shape")) {
    return shape_error(
        c, "input node carries no dtype/shape attributes (create it with Builder::input)");
  }
  const Shape& shape = c.attrs.shape("shape");
  LJ_RETURN_IF_ERROR(infer::check_shape_attr(c, shape, "shape"));
  out->assign(1, TypedShape{c.attrs.dtype("dtype"), shape});
  return ok_status();
}

// constant(value, dtype, shape), iota(shape, axis, dtype), random_normal / random_uniform
// (shape, dtype, ...): the output is `dtype` with `shape`, which may hold symbols.
Status infer_fill(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& shape = c.attrs.shape("shape");
  const DType dtype = c.attrs.dtype("dtype");
  LJ_RETURN_IF_ERROR(infer::check_shape_attr(c, shape, "shape"));
  const Op op = c.def.op;
  if (op == Op::iota) {
    int axis = 0;
    if (!infer::norm_axis(c.attrs.i("axis"), shape.rank(), &axis)) {
      return shape_error(c, "axis " + std::to_string(c.attrs.i("axis")) +
                                " is out of range for shape " + shape.to_string());
    }
  }
  if ((op == Op::random_normal || op == Op::random_uniform) && !is_float(dtype)) {
    return shape_error(c,
                       std::string("random values need a float dtype, got ") + dtype_name(dtype));
  }
  if (op == Op::random_normal && !(c.attrs.f("std") >= 0)) {
    return shape_error(c, "std must be >= 0, got " + std::to_string(c.attrs.f("std")));
  }
  if (op == Op::random_uniform && !(c.attrs.f("low") <= c.attrs.f("high"))) {
    return shape_error(c, "low must be <= high, got [" + std::to_string(c.attrs.f("low")) + ", " +
                              std::to_string(c.attrs.f("high")) + ")");
  }
  out->assign(1, TypedShape{dtype, shape});
  return ok_status();
}

}  // namespace lj
