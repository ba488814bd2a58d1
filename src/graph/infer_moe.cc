// Shape inference for the mixture-of-experts ops: topk, moe_sort, grouped_matmul and its weight
// gradient. Group sizes are data (known at run time), so every shape here is static: the routed
// row count R = N * k does not depend on the routing.
#include "graph/infer_util.h"

namespace lj {

// topk: x (..., E) float -> (..., k) i32, 0 < k <= E.
Status infer_topk(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& x = c.in[0].shape;
  if (x.rank() < 1) return shape_error(c, "x must have rank >= 1: (..., E)");
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0, "x"));
  const int64_t k = c.attrs.i("k");
  const Dim& e = x[x.rank() - 1];
  if (k <= 0 || (e.is_concrete() && k > e.coef())) {
    return shape_error(c, "k = " + std::to_string(k) + " must be in [1, " + e.to_string() + "]");
  }
  std::vector<Dim> dims = x.dims();
  dims.back() = Dim(k);
  out->assign(1, TypedShape{DType::i32, Shape(std::move(dims))});
  return ok_status();
}

// moe_sort: indices (N, k) int -> token (N*k), inverse (N*k), group_sizes (E), all i32.
Status infer_moe_sort(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_index(c, 0, "indices"));
  const Shape& idx = c.in[0].shape;
  if (idx.rank() != 2) return shape_error(c, "indices must be (N, k)");
  const int64_t experts = c.attrs.i("experts");
  if (experts <= 0) return shape_error(c, "experts must be positive");
  const Shape rows{idx[0] * idx[1]};
  out->assign({TypedShape{DType::i32, rows}, TypedShape{DType::i32, rows},
               TypedShape{DType::i32, Shape{Dim(experts)}}});
  return ok_status();
}

namespace {

// group_sizes (E) int, with E = w's (or the output's) leading dim.
Status check_group_sizes(const InferCtx& c, int i, const Dim& experts) {
  LJ_RETURN_IF_ERROR(infer::require_index(c, i, "group_sizes"));
  const Shape& g = c.in[static_cast<size_t>(i)].shape;
  if (g.rank() != 1 || g[0] != experts) {
    return shape_error(c, "group_sizes must be (E) with E = " + experts.to_string());
  }
  return ok_status();
}

}  // namespace

// grouped_matmul: x (R, K), w (E, N, K) when tb else (E, K, N), group_sizes (E) -> (R, N).
Status infer_grouped_matmul(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& x = c.in[0].shape;
  const Shape& w = c.in[1].shape;
  if (x.rank() != 2 || w.rank() != 3) return shape_error(c, "x must be (R, K) and w (E, ., .)");
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  LJ_RETURN_IF_ERROR(check_group_sizes(c, 2, w[0]));
  const bool tb = c.attrs.b("tb");
  const Dim k = tb ? w[2] : w[1];
  const Dim n = tb ? w[1] : w[2];
  if (k != x[1]) {
    return shape_error(c, "contracted dims differ: K = " + x[1].to_string() + " vs " +
                              k.to_string() + (tb ? " (tb=true)" : " (tb=false)"));
  }
  out->assign(1, TypedShape{c.in[0].dtype, Shape{x[0], n}});
  return ok_status();
}

// grouped_matmul_wgrad: a (R, P), b (R, Q), group_sizes (E) -> (E, P, Q); attribute dtype f32
// (optional) of bf16 / f16 operands: the f32 sums stored as they are, a cast up folded into the
// GEMMs (passes/master_weights), as matmul's.
Status infer_grouped_matmul_wgrad(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& a = c.in[0].shape;
  const Shape& b = c.in[1].shape;
  if (a.rank() != 2 || b.rank() != 2 || a[0] != b[0]) {
    return shape_error(c, "a and b must be (R, P) and (R, Q) with the same rows");
  }
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  const Shape& g = c.in[2].shape;
  if (g.rank() != 1 || !g[0].is_concrete()) return shape_error(c, "group_sizes must be (E)");
  LJ_RETURN_IF_ERROR(check_group_sizes(c, 2, g[0]));
  LJ_ASSIGN_OR_RETURN(const DType dt, infer::gemm_output_dtype(c));
  out->assign(1, TypedShape{dt, Shape{g[0], a[1], b[1]}});
  return ok_status();
}

}  // namespace lj
