// Shape inference for elementwise ops: unary math, cast, binary arithmetic, comparisons, where.
// Data operands must share a dtype (no implicit promotion) and broadcast numpy-style.
// Math (unary and binary arithmetic) needs a float dtype; comparisons accept any dtype and
// give u8 (1 or 0); where's cond is u8 and its output takes a's dtype.
#include "graph/infer_util.h"

namespace lj {

// neg, exp, log, ..., pow_scalar: x (...) float -> (...) same type.
Status infer_unary(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  out->assign(1, c.in[0]);
  return ok_status();
}

// cast: x (...) any dtype -> (...) attr dtype.
Status infer_cast(const InferCtx& c, std::vector<TypedShape>* out) {
  out->assign(1, TypedShape{c.attrs.dtype("dtype"), c.in[0].shape});
  return ok_status();
}

namespace {

Status broadcast2(const InferCtx& c, Shape* shape) {
  if (!broadcast_shapes(c.in[0].shape, c.in[1].shape, shape))
    return shape_error(c, "cannot broadcast");
  return ok_status();
}

}  // namespace

// add, sub, mul, div: a, b float of one dtype -> broadcast(a, b).
Status infer_binary(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  Shape shape;
  LJ_RETURN_IF_ERROR(broadcast2(c, &shape));
  out->assign(1, TypedShape{c.in[0].dtype, std::move(shape)});
  return ok_status();
}

// eq, lt, gt: a, b of one dtype -> u8 broadcast(a, b).
Status infer_compare(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  Shape shape;
  LJ_RETURN_IF_ERROR(broadcast2(c, &shape));
  out->assign(1, TypedShape{DType::u8, std::move(shape)});
  return ok_status();
}

// where(cond u8, a, b): a and b of one dtype -> broadcast(cond, a, b) of a's dtype.
Status infer_where(const InferCtx& c, std::vector<TypedShape>* out) {
  if (c.in[0].dtype != DType::u8) {
    return shape_error(
        c, std::string("cond must be u8 (from eq/lt/gt), got ") + dtype_name(c.in[0].dtype));
  }
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 1, 2));
  Shape ab, shape;
  if (!broadcast_shapes(c.in[1].shape, c.in[2].shape, &ab) ||
      !broadcast_shapes(c.in[0].shape, ab, &shape)) {
    return shape_error(c, "cannot broadcast");
  }
  out->assign(1, TypedShape{c.in[1].dtype, std::move(shape)});
  return ok_status();
}

}  // namespace lj
