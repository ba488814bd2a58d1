// Shape inference for the fused ops of pattern fusion (graph/ops.def's last block): rms_norm,
// add_rms_norm and rms_norm_backward, swiglu and swiglu_backward, rope. Operands share one float
// dtype and do not broadcast: each op takes exactly the shapes the primitive subgraph it replaces
// had, so a pass that fused something else is an error here, not a silent broadcast.
#include "graph/infer_util.h"

namespace lj {
namespace {

// Inputs i and j must have the same dtype and shape.
Status require_same_type(const InferCtx& c, int i, int j, const char* what) {
  if (c.in[static_cast<size_t>(i)] == c.in[static_cast<size_t>(j)]) return ok_status();
  return shape_error(c, std::string(what) + " must have the same dtype and shape");
}

// x (..., C) float of rank >= 1 and w (C) of x's dtype.
Status check_norm_operands(const InferCtx& c, int x, int w) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, x, "x"));
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, x, w));
  const Shape& xs = c.in[static_cast<size_t>(x)].shape;
  const Shape& ws = c.in[static_cast<size_t>(w)].shape;
  if (xs.rank() < 1) return shape_error(c, "x must have rank >= 1");
  if (ws.rank() != 1 || ws[0] != xs.dim(-1)) return shape_error(c, "w must be (C), x's last dim");
  return ok_status();
}

// (..., C) -> (..., 1): the shape of rstd.
TypedShape row_stat(const TypedShape& x) {
  TypedShape t = x;
  t.shape[t.shape.rank() - 1] = Dim(1);
  return t;
}

}  // namespace

// rms_norm(x (..., C), w (C)) -> y (..., C), rstd (..., 1).
Status infer_rms_norm(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_norm_operands(c, 0, 1));
  *out = {c.in[0], row_stat(c.in[0])};
  return ok_status();
}

// add_rms_norm(x (..., C), r (..., C), w (C)) -> s (..., C), y (..., C), rstd (..., 1).
Status infer_add_rms_norm(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_norm_operands(c, 0, 2));
  LJ_RETURN_IF_ERROR(require_same_type(c, 0, 1, "x and r"));
  *out = {c.in[0], c.in[0], row_stat(c.in[0])};
  return ok_status();
}

// rms_norm_backward(dy, x, w, rstd [, dres]) -> dx (x's type), dw (w's type).
Status infer_rms_norm_backward(const InferCtx& c, std::vector<TypedShape>* out) {
  if (c.in.size() != 4 && c.in.size() != 5) {
    return shape_error(c, "takes (dy, x, w, rstd) or (dy, x, w, rstd, dres)");
  }
  LJ_RETURN_IF_ERROR(check_norm_operands(c, 1, 2));
  LJ_RETURN_IF_ERROR(require_same_type(c, 0, 1, "dy and x"));
  if (!(c.in[3] == row_stat(c.in[1]))) return shape_error(c, "rstd must be x's shape with C = 1");
  if (c.in.size() == 5) LJ_RETURN_IF_ERROR(require_same_type(c, 4, 1, "dres and x"));
  *out = {c.in[1], c.in[2]};
  // dw_dtype (optional): f32 for a 16-bit w, the f32 sum stored as it is (a cast up folded into
  // the kernel, passes/master_weights).
  if (c.attrs.has("dw_dtype")) {
    const DType want = c.attrs.dtype("dw_dtype"), w = c.in[2].dtype;
    if (want != w && !(want == DType::f32 && (w == DType::bf16 || w == DType::f16))) {
      return shape_error(c, "dw_dtype must be w's dtype, or f32 for a 16-bit w");
    }
    (*out)[1].dtype = want;
  }
  return ok_status();
}

// swiglu(gate, up) -> out, all of one type.
Status infer_swiglu(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0, "gate"));
  LJ_RETURN_IF_ERROR(require_same_type(c, 0, 1, "gate and up"));
  out->assign(1, c.in[0]);
  return ok_status();
}

// swiglu_backward(dout, gate, up) -> dgate, dup, all of one type.
Status infer_swiglu_backward(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 1, "gate"));
  LJ_RETURN_IF_ERROR(require_same_type(c, 1, 2, "gate and up"));
  LJ_RETURN_IF_ERROR(require_same_type(c, 0, 1, "dout and gate"));
  *out = {c.in[1], c.in[1]};
  return ok_status();
}

// swiglu_packed(x (..., 2F)) -> (..., F), the last dim concrete and even.
Status infer_swiglu_packed(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0, "x"));
  const Shape& x = c.in[0].shape;
  if (x.rank() < 1) return shape_error(c, "x must be (..., 2F)");
  const Dim d = x.dim(-1);
  if (!d.is_concrete() || d.value() % 2 != 0)
    return shape_error(c, "the last dim must be concrete and even");
  TypedShape y = c.in[0];
  y.shape[x.rank() - 1] = Dim(d.value() / 2);
  out->assign(1, y);
  return ok_status();
}

// swiglu_packed_backward(dout (..., F), x (..., 2F)) -> dx (..., 2F), of x's type.
Status infer_swiglu_packed_backward(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 1, "x"));
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  std::vector<TypedShape> y;
  LJ_RETURN_IF_ERROR(infer_swiglu_packed(InferCtx{c.def, c.in.subspan(1), c.attrs}, &y));
  if (c.in[0].shape != y[0].shape) return shape_error(c, "dout must be swiglu_packed(x)'s shape");
  out->assign(1, c.in[1]);
  return ok_status();
}

// rope(x (..., T, D), cos (T, D), sin (T, D)) -> (..., T, D), D even.
Status infer_rope(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0, "x"));
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  LJ_RETURN_IF_ERROR(require_same_type(c, 1, 2, "cos and sin"));
  const Shape& x = c.in[0].shape;
  if (x.rank() < 2) return shape_error(c, "x must be (..., T, D)");
  const Dim d = x.dim(-1);
  if (!d.is_concrete() || d.value() % 2 != 0) return shape_error(c, "D must be concrete and even");
  if (c.in[1].shape != Shape{x.dim(-2), d}) return shape_error(c, "cos and sin must be (T, D)");
  out->assign(1, c.in[0]);
  return ok_status();
}

}  // namespace lj
