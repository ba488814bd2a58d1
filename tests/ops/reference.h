// Plain reference kernels for every op of graph/ops.def (except `input`), in double precision.
// They are the ground truth of the tier-2 op tests, so they are written to be obviously correct,
// not fast: naive loops over explicit multi-indices, no tiling, no threads, no clever algebra
// (sdpa materialises the whole score matrix, matmul is a triple loop with broadcast batch
// indexing). A RefTensor holds its values as doubles whatever its dtype; `dtype` is only the tag
// the real kernel's output must carry. Every tensor is dense and row-major.
//
// The random_* ops have no bitwise reference (the generator is the backend's own counter-based
// hash); their reference is distributional: normal_cdf / uniform_cdf and the Kolmogorov-Smirnov
// statistic ks_statistic().
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "graph/op.h"

namespace lj::ref {

struct RefTensor {
  DType dtype = DType::f64;
  std::vector<int64_t> dims;
  std::vector<double> data;  // numel(dims) values, row-major

  int64_t numel() const;
  int rank() const { return static_cast<int>(dims.size()); }
  double& operator[](int64_t i) { return data[static_cast<size_t>(i)]; }
  double operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
};

// A zero-filled tensor.
RefTensor zeros(DType dtype, std::vector<int64_t> dims);

// ---- Index helpers (row-major) ----
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims);
// Flat index -> multi-index.
std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims);
// Multi-index -> flat index.
int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims);
// Flat index into `dims` of the element that out multi-index `out_idx` reads under numpy
// broadcasting (dims is right-aligned with out_idx; a dim of 1 always reads index 0).
int64_t broadcast_index(const std::vector<int64_t>& out_idx, const std::vector<int64_t>& dims);
// numpy broadcast of two shapes; checks they broadcast.
std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// The value `v` becomes when stored as `t` (f32 rounding, bf16/f16 rounding via core/dtype.h,
// float -> int truncation toward zero).
double round_to(DType t, double v);

// ---- Sources ----
RefTensor constant(double value, DType dtype, std::vector<int64_t> dims);
RefTensor iota(std::vector<int64_t> dims, int axis, DType dtype);
double normal_cdf(double x, double mean, double std);
double uniform_cdf(double x, double low, double high);
// sup |F_empirical - F| over the sample; `cdf` is the model distribution.
double ks_statistic(std::vector<double> sample, double (*cdf)(double, double, double), double p0,
                    double p1);

// ---- Elementwise ----
// The scalar function of a unary op (neg ... tanh, pow_scalar with `exponent`).
double unary_scalar(Op op, double x, double exponent);
RefTensor unary(Op op, const RefTensor& x, double exponent = 0.0);
RefTensor cast(const RefTensor& x, DType to);
// add, sub, mul, div, eq, lt, gt with numpy broadcasting; comparisons give u8 1/0.
RefTensor binary(Op op, const RefTensor& a, const RefTensor& b);
// a where cond != 0 else b; all three broadcast; dtype of a.
RefTensor where(const RefTensor& cond, const RefTensor& a, const RefTensor& b);

// ---- Reductions ----
// sum, mean or max over `axes` (negative allowed; empty: all axes).
RefTensor reduce(Op op, const RefTensor& x, std::vector<int64_t> axes, bool keepdim);
RefTensor softmax(const RefTensor& x, int axis);
RefTensor log_softmax(const RefTensor& x, int axis);

// ---- Contraction ----
// a (..., M, K) or (..., K, M) when ta; b (..., K, N) or (..., N, K) when tb; batch dims
// broadcast; out (batch..., M, N).
RefTensor matmul(const RefTensor& a, const RefTensor& b, bool ta, bool tb);

// ---- Data movement ----
RefTensor reshape(const RefTensor& x, std::vector<int64_t> dims);
RefTensor permute(const RefTensor& x, const std::vector<int64_t>& perm);
// [start, end) along axis, end clamped to the dim.
RefTensor slice(const RefTensor& x, int axis, int64_t start, int64_t end);
RefTensor concat(const std::vector<RefTensor>& xs, int axis);
// torch.expand: leading dims may be added, dims of size 1 broadcast.
RefTensor expand(const RefTensor& x, const std::vector<int64_t>& dims);
// table (V, C...), ids (N...) -> (N..., C...). Checks ids are in range (tests feed good ids).
RefTensor gather(const RefTensor& table, const RefTensor& ids);
// ids (N...), src (N..., C...) -> out_dims (V, C...): zeros, then out[ids[n]] += src[n].
RefTensor scatter_add(const RefTensor& ids, const RefTensor& src,
                      const std::vector<int64_t>& out_dims);

// ---- Loss ----
// logits (N, V), labels (N) -> () mean over rows with label != ignore_index of
// logsumexp(row) - row[label]; NaN when no row counts.
RefTensor cross_entropy(const RefTensor& logits, const RefTensor& labels, int64_t ignore_index);
// -> dlogits (N, V) = (softmax(row) - onehot(label)) * dloss / num_valid; zero rows if ignored.
RefTensor cross_entropy_backward(const RefTensor& logits, const RefTensor& labels,
                                 const RefTensor& dloss, int64_t ignore_index);

// ---- Attention ----
struct SdpaOut {
  RefTensor out;  // (B, H, Tq, D)
  RefTensor lse;  // (B, H, Tq)
};
// q (B, H, Tq, D), k and v (B, G, Tk, D); q head h reads kv head h / (H / G); scale <= 0 means
// 1/sqrt(D); causal: query i sees keys 0..i; window > 0 also hides keys j <= i - window.
SdpaOut sdpa(const RefTensor& q, const RefTensor& k, const RefTensor& v, bool causal, double scale,
             int64_t window = 0);
struct SdpaGrads {
  RefTensor dq;  // (B, H, Tq, D)
  RefTensor dk;  // (B, G, Tk, D)
  RefTensor dv;  // (B, G, Tk, D)
};
// Recomputes the probabilities from q, k (does not trust a saved out / lse).
SdpaGrads sdpa_backward(const RefTensor& q, const RefTensor& k, const RefTensor& v,
                        const RefTensor& dout, bool causal, double scale, int64_t window = 0);

}  // namespace lj::ref
