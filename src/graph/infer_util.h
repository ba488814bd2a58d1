// Small checks shared by the shape-inference rules (graph/infer_*.cc). Private to graph/.
// Every failure goes through shape_error, so the message names the op and all input types.
#pragma once

#include <string>

#include "graph/op_rules.h"

namespace lj::infer {

// Normalizes `axis` (negative counts from the end) into [0, rank); false when out of range.
inline bool norm_axis(int64_t axis, int rank, int* out) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return false;
  *out = static_cast<int>(a);
  return true;
}

// A dim a shape attribute may hold: concrete >= 0, or symbolic with a positive coefficient.
inline bool valid_dim(const Dim& d) {
  return d.is_concrete() ? d.coef() >= 0 : d.coef() > 0;
}

inline Status check_shape_attr(const InferCtx& c, const Shape& s, const char* what) {
  for (const Dim& d : s.dims()) {
    if (!valid_dim(d)) {
      return shape_error(
          c, std::string(what) + " " + s.to_string() + " has an invalid dim " + d.to_string());
    }
  }
  return ok_status();
}

// Input i (called `name` in the message, "input i" when null) must hold a float dtype
// (f32, f64, bf16, f16).
inline Status require_float(const InferCtx& c, int i, const char* name = nullptr) {
  const TypedShape& t = c.in[static_cast<size_t>(i)];
  if (is_float(t.dtype)) return ok_status();
  const std::string who = name ? std::string(name) : "input " + std::to_string(i);
  return shape_error(c, who + " must be a float type, got " + dtype_name(t.dtype));
}

// A GEMM's output dtype: its operands' (input 0), or the optional attribute dtype, f32 of bf16 /
// f16 operands: the f32 accumulator stored as it is, a cast up folded into the GEMM
// (passes/master_weights).
inline StatusOr<DType> gemm_output_dtype(const InferCtx& c) {
  const DType dt = c.in[0].dtype;
  if (!c.attrs.has("dtype")) return dt;
  const DType want = c.attrs.dtype("dtype");
  if (want != dt && !(want == DType::f32 && (dt == DType::bf16 || dt == DType::f16))) {
    return shape_error(c, std::string("output dtype ") + dtype_name(want) + " of " +
                              dtype_name(dt) + " operands: only f32 of bf16 / f16 ones");
  }
  return want;
}

// Input i must hold integer indices (i32 or i64).
inline Status require_index(const InferCtx& c, int i, const char* role) {
  const TypedShape& t = c.in[static_cast<size_t>(i)];
  if (t.dtype == DType::i32 || t.dtype == DType::i64) return ok_status();
  return shape_error(c, std::string(role) + " must be i32 or i64, got " + dtype_name(t.dtype));
}

// Inputs i and j must have the same dtype (no implicit promotion).
inline Status require_same_dtype(const InferCtx& c, int i, int j) {
  const DType a = c.in[static_cast<size_t>(i)].dtype;
  const DType b = c.in[static_cast<size_t>(j)].dtype;
  if (a == b) return ok_status();
  return shape_error(c, std::string("dtypes differ (") + dtype_name(a) + " vs " + dtype_name(b) +
                            "); cast one of them first");
}

}  // namespace lj::infer
