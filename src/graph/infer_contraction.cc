// Shape inference for contractions and the ops built around them: matmul, sdpa (attention) and
// its backward, cross_entropy and its backward, and the fused matmul_add and
// linear_cross_entropy. Operands share one float dtype.
#include "graph/infer_util.h"

namespace lj {

// matmul: a (..., M, K) [(..., K, M) when ta], b (..., K, N) [(..., N, K) when tb]
// -> (broadcast(batch_a, batch_b)..., M, N).
Status infer_matmul(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& a = c.in[0].shape;
  const Shape& b = c.in[1].shape;
  if (a.rank() < 2 || b.rank() < 2) return shape_error(c, "both operands need rank >= 2");
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  const bool ta = c.attrs.b("ta");
  const bool tb = c.attrs.b("tb");
  const Dim m = ta ? a[a.rank() - 1] : a[a.rank() - 2];
  const Dim ka = ta ? a[a.rank() - 2] : a[a.rank() - 1];
  const Dim kb = tb ? b[b.rank() - 1] : b[b.rank() - 2];
  const Dim n = tb ? b[b.rank() - 2] : b[b.rank() - 1];
  if (ka != kb) {
    return shape_error(c, "contracted dims differ: K = " + ka.to_string() + " vs " +
                              kb.to_string() + " (ta=" + (ta ? "true" : "false") +
                              ", tb=" + (tb ? "true" : "false") + ")");
  }
  const Shape batch_a(std::vector<Dim>(a.dims().begin(), a.dims().end() - 2));
  const Shape batch_b(std::vector<Dim>(b.dims().begin(), b.dims().end() - 2));
  Shape batch;
  if (!broadcast_shapes(batch_a, batch_b, &batch)) {
    return shape_error(c, "batch dims " + batch_a.to_string() + " and " + batch_b.to_string() +
                              " do not broadcast");
  }
  std::vector<Dim> dims = batch.dims();
  dims.push_back(m);
  dims.push_back(n);
  LJ_ASSIGN_OR_RETURN(const DType dt, infer::gemm_output_dtype(c));
  out->assign(1, TypedShape{dt, Shape(std::move(dims))});
  return ok_status();
}

namespace {

// Checks q (B, H, Tq, D), k (B, G, Tk, D), v (B, G, Tk, D) and the sdpa attributes.
Status check_attention(const InferCtx& c) {
  const Shape& q = c.in[0].shape;
  const Shape& k = c.in[1].shape;
  const Shape& v = c.in[2].shape;
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) {
    return shape_error(c, "q, k, v must be rank 4: (B, H, T, D)");
  }
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 2));
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0));
  if (k != v) return shape_error(c, "k and v must have the same shape");
  if (q[0] != k[0])
    return shape_error(c, "batch dims differ: " + q[0].to_string() + " vs " + k[0].to_string());
  if (q[3] != k[3])
    return shape_error(c, "head dims differ: " + q[3].to_string() + " vs " + k[3].to_string());
  Dim group;
  if (k[1] == Dim(0) || !q[1].divide(k[1], &group)) {
    return shape_error(c, "query heads " + q[1].to_string() + " are not a multiple of kv heads " +
                              k[1].to_string());
  }
  if (c.attrs.b("causal") && q[2] != k[2]) {
    return shape_error(
        c, "causal attention needs Tq == Tk, got " + q[2].to_string() + " and " + k[2].to_string());
  }
  const int64_t window = c.attrs.i_or("window", 0);
  if (window < 0 || (window > 0 && !c.attrs.b("causal"))) {
    return shape_error(c, "a sliding window must be positive, on causal attention");
  }
  return ok_status();
}

}  // namespace

// The dtype of a saved softmax statistic (sdpa's lse): f32 for 16-bit inputs, as flash attention
// keeps it (a bf16 lse would perturb every recomputed probability by up to |lse| * 2^-9).
static DType stat_dtype(DType t) {
  return t == DType::bf16 || t == DType::f16 ? DType::f32 : t;
}

// sdpa: q (B, H, Tq, D), k (B, G, Tk, D), v (B, G, Tk, D) -> out (B, H, Tq, D), lse (B, H, Tq).
Status infer_sdpa(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_attention(c));
  const Shape& q = c.in[0].shape;
  out->assign({c.in[0], TypedShape{stat_dtype(c.in[0].dtype), Shape{q[0], q[1], q[2]}}});
  return ok_status();
}

// sdpa_backward: q, k, v, out (B, H, Tq, D), lse (B, H, Tq), dout (B, H, Tq, D)
// -> dq, dk, dv with the types of q, k, v.
Status infer_sdpa_backward(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_attention(c));
  const TypedShape& q = c.in[0];
  const TypedShape lse{stat_dtype(q.dtype), Shape{q.shape[0], q.shape[1], q.shape[2]}};
  if (!(c.in[3] == q)) return shape_error(c, "out must have q's type " + q.to_string());
  if (!(c.in[4] == lse)) return shape_error(c, "lse must be " + lse.to_string());
  if (!(c.in[5] == q)) return shape_error(c, "dout must have q's type " + q.to_string());
  out->assign({c.in[0], c.in[1], c.in[2]});
  return ok_status();
}

namespace {

// Checks logits (N, V) float and labels (N) i32/i64.
Status check_cross_entropy(const InferCtx& c) {
  const Shape& logits = c.in[0].shape;
  const Shape& labels = c.in[1].shape;
  if (logits.rank() != 2) return shape_error(c, "logits must be rank 2: (N, V)");
  if (labels.rank() != 1) return shape_error(c, "labels must be rank 1: (N)");
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0, "logits"));
  LJ_RETURN_IF_ERROR(infer::require_index(c, 1, "labels"));
  if (logits[0] != labels[0]) {
    return shape_error(c, "logits have " + logits[0].to_string() + " rows but labels have " +
                              labels[0].to_string());
  }
  return ok_status();
}

}  // namespace

// cross_entropy: logits (N, V), labels (N) -> () in logits' dtype (f32 for bf16 / f16 logits).
// The loss is f32 for 16-bit logits (the kernel's softmax runs in f32, and a bf16 loss would
// carry 3 significant digits); otherwise the logits' dtype.
static DType loss_dtype(DType logits) {
  return logits == DType::bf16 || logits == DType::f16 ? DType::f32 : logits;
}

Status infer_cross_entropy(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_cross_entropy(c));
  out->assign(1, TypedShape{loss_dtype(c.in[0].dtype), Shape{}});
  return ok_status();
}

// cross_entropy_backward: logits (N, V), labels (N), dloss () -> dlogits (N, V).
Status infer_cross_entropy_backward(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_cross_entropy(c));
  const TypedShape scalar{loss_dtype(c.in[0].dtype), Shape{}};
  if (!(c.in[2] == scalar)) return shape_error(c, "dloss must be " + scalar.to_string());
  out->assign(1, c.in[0]);
  return ok_status();
}

// matmul_add: a, b as matmul, c with matmul(a, b)'s type -> that type.
Status infer_matmul_add(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer_matmul(InferCtx{c.def, c.in.first(2), c.attrs}, out));
  if (!(c.in[2] == (*out)[0])) {
    return shape_error(c, "the addend must have the product's type " + (*out)[0].to_string());
  }
  return ok_status();
}

namespace {

// Checks x (N, C), w (V, C) of one float dtype, labels (N) i32/i64, and the chunk attribute.
Status check_linear_cross_entropy(const InferCtx& c) {
  const Shape& x = c.in[0].shape;
  const Shape& w = c.in[1].shape;
  const Shape& labels = c.in[2].shape;
  if (x.rank() != 2) return shape_error(c, "x must be rank 2: (N, C)");
  if (w.rank() != 2) return shape_error(c, "w must be rank 2: (V, C)");
  if (labels.rank() != 1) return shape_error(c, "labels must be rank 1: (N)");
  LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, 1));
  LJ_RETURN_IF_ERROR(infer::require_float(c, 0, "x"));
  LJ_RETURN_IF_ERROR(infer::require_index(c, 2, "labels"));
  if (x[1] != w[1]) {
    return shape_error(c, "x has " + x[1].to_string() + " columns but w has " + w[1].to_string());
  }
  if (x[0] != labels[0]) {
    return shape_error(
        c, "x has " + x[0].to_string() + " rows but labels have " + labels[0].to_string());
  }
  if (c.attrs.i_or("chunk", 0) < 0) return shape_error(c, "chunk must be >= 0 rows");
  return ok_status();
}

}  // namespace

// linear_cross_entropy: x (N, C), w (V, C), labels (N) -> loss () (f32 for 16-bit x, as
// cross_entropy), dx (x's type), dw (w's).
Status infer_linear_cross_entropy(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_linear_cross_entropy(c));
  out->assign({TypedShape{loss_dtype(c.in[0].dtype), Shape{}}, c.in[0], c.in[1]});
  return ok_status();
}

}  // namespace lj
