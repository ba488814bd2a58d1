// matmul on the CPU: out (batch..., M, N) = op(a) (batch..., M, K) x op(b) (batch..., K, N),
// op() transposing the last two dims when ta / tb is set; batch dims broadcast numpy-style.
// matmul_add(a, b, c) is the same GEMM accumulating into a copy of c (out's shape).
// f32 goes through oneDNN's dnnl_sgemm (row-major API, OpenMP inside, thread count from the
// kernel context). bf16 (mixed precision, passes/autocast) goes through oneDNN's matmul
// primitive: bf16 operands, f32 accumulation, the output rounded once to bf16 (AMX tiles or
// AVX512_BF16 dot products, whichever oneDNN's dispatcher picks: ONEDNN_VERBOSE=1 names it).
// f64 exists for gradient checks and uses a cache-blocked loop kernel.
//
// Batch handling, in order of preference:
//   - a (batch..., M, K) with ta = false and b without batch (a linear layer's (out, in) weight):
//     the batch rows are contiguous, so the whole call is ONE GEMM of (batch*M, K) x op(b);
//   - many independent GEMMs: parallel over the batch, each GEMM on one thread (oneDNN runs
//     single-threaded inside a parallel region);
//   - few large GEMMs: one after another, each using every thread.
// Each output element is written by exactly one GEMM call whose partition depends only on the
// shapes and the thread count, so results are bitwise reproducible for a given thread count
// (f64: for any thread count; every element sums k in increasing order).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/gemm.h"

namespace lj::cpu {
namespace {

// The shapes of one matmul call, with the batch already broadcast.
struct MatmulPlan {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t batch = 1;                  // number of output matrices
  std::vector<int64_t> a_off, b_off;  // per output matrix: element offset of its a / b matrix
  bool a_batched = false;             // a has a batch numel > 1
  bool b_batched = false;
};

// Element offsets of x's matrices for every output batch index (0 stride on broadcast dims).
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& x_dims,
                                   const std::vector<int64_t>& out_batch) {
  const int nb = static_cast<int>(out_batch.size());
  const int xb = static_cast<int>(x_dims.size()) - 2;
  const int64_t mat = x_dims[x_dims.size() - 2] * x_dims[x_dims.size() - 1];
  std::vector<int64_t> stride(static_cast<size_t>(nb), 0);
  int64_t s = mat;
  for (int d = nb - 1; d >= 0; --d) {
    const int xd = d - (nb - xb);
    if (xd < 0) continue;
    const int64_t size = x_dims[static_cast<size_t>(xd)];
    if (size != 1) stride[static_cast<size_t>(d)] = s;
    s *= size;
  }
  int64_t total = 1;
  for (int64_t v : out_batch) total *= v;
  std::vector<int64_t> off(static_cast<size_t>(total), 0);
  std::vector<int64_t> idx(static_cast<size_t>(nb), 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t o = 0;
    for (int d = 0; d < nb; ++d) o += idx[static_cast<size_t>(d)] * stride[static_cast<size_t>(d)];
    off[static_cast<size_t>(i)] = o;
    for (int d = nb - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < out_batch[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return off;
}

int64_t batch_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) n *= dims[i];
  return n;
}

MatmulPlan make_plan(const KernelContext& c) {
  const TensorView& a = c.in[0];
  const TensorView& b = c.in[1];
  const TensorView& out = c.out[0];
  LJ_CHECK(a.rank() >= 2 && b.rank() >= 2 && out.rank() >= 2) << "matmul needs rank >= 2";
  MatmulPlan p;
  p.ta = c.attrs().b_or("ta", false);
  p.tb = c.attrs().b_or("tb", false);
  p.m = p.ta ? a.dim(-1) : a.dim(-2);
  p.k = p.ta ? a.dim(-2) : a.dim(-1);
  p.n = p.tb ? b.dim(-2) : b.dim(-1);
  const int64_t kb = p.tb ? b.dim(-1) : b.dim(-2);
  LJ_CHECK_EQ(p.k, kb) << "matmul inner dims";
  LJ_CHECK_EQ(out.dim(-2), p.m) << "matmul output rows";
  LJ_CHECK_EQ(out.dim(-1), p.n) << "matmul output cols";
  std::vector<int64_t> out_batch(out.dims.begin(), out.dims.end() - 2);
  p.batch = batch_numel(out.dims);
  p.a_batched = batch_numel(a.dims) > 1;
  p.b_batched = batch_numel(b.dims) > 1;
  p.a_off = batch_offsets(a.dims, out_batch);
  p.b_off = batch_offsets(b.dims, out_batch);
  return p;
}

// ---- f32: oneDNN --------------------------------------------------------------------------

// c (m, n) = op(a) (m, k) x op(b) (k, n) + beta * c, all row-major and dense.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
           float beta, float* c) {
  gemm(ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

// Runs gemm(a_i, b_i, out_i) for every output matrix i of the plan, one GEMM when the batch is
// contiguous rows of a, else parallel over the batch or one after another (see the top).
template <class T, class O, class Gemm>
void matmul_batched(const KernelContext& c, const MatmulPlan& p, const T* a, const T* b, O* out,
                    Gemm gemm) {
  const int threads = std::max(1, c.threads);
  ScopedOmpThreads scoped(threads);
  if (!p.b_batched && (!p.a_batched || !p.ta)) {
    // b is one matrix, so out's batch is a's (or 1), and a's rows are contiguous: one GEMM of
    // (batch * M, K) x op(b).
    gemm(p.batch * p.m, a, b, out);
    return;
  }
  const int64_t mat_out = p.m * p.n;
  const bool across_batch = threads > 1 && (p.batch % threads == 0 || p.batch >= 4 * threads);
  if (across_batch) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < p.batch; ++i) {
      gemm(p.m, a + p.a_off[static_cast<size_t>(i)], b + p.b_off[static_cast<size_t>(i)],
           out + i * mat_out);
    }
  } else {
    for (int64_t i = 0; i < p.batch; ++i) {
      gemm(p.m, a + p.a_off[static_cast<size_t>(i)], b + p.b_off[static_cast<size_t>(i)],
           out + i * mat_out);
    }
  }
}

// beta = 1 accumulates into out (matmul_add); 0 overwrites it.
void matmul_f32(const KernelContext& c, const MatmulPlan& p, float beta) {
  matmul_batched(c, p, c.in[0].as<float>(), c.in[1].as<float>(), c.out[0].as<float>(),
                 [&](int64_t m, const float* a, const float* b, float* out) {
                   sgemm(p.ta, p.tb, m, p.n, p.k, a, b, beta, out);
                 });
}

// ---- bf16: oneDNN's matmul primitive -------------------------------------------------------

// bf16 operands; out bf16 or f32. accumulate: out += (matmul_add, out holds the addend).
void matmul_bf16(const KernelContext& c, const MatmulPlan& p, bool accumulate) {
  const auto* a = c.in[0].as<uint16_t>();
  const auto* b = c.in[1].as<uint16_t>();
  const bool f32_out = c.out[0].dtype == DType::f32;
  const auto gemm = [&](int64_t m, const uint16_t* ai, const uint16_t* bi, auto* out) {
    gemm_bf16(p.ta, p.tb, m, p.n, p.k, ai, bi, out, f32_out, accumulate);
  };
  if (f32_out) {
    matmul_batched(c, p, a, b, c.out[0].as<float>(), gemm);
  } else {
    matmul_batched(c, p, a, b, c.out[0].as<uint16_t>(), gemm);
  }
}

// ---- f64: cache-blocked loops (gradient checks only) ---------------------------------------

constexpr int64_t kRowBlock = 16;
constexpr int64_t kColBlock = 256;
constexpr int64_t kDepthBlock = 128;

// Rows [r0, r1) of c (m, n) = op(a) x op(b) for one matrix. Every element sums k in increasing
// order, whatever the blocking and the thread, so the result is thread-count invariant.
void dgemm_rows(const MatmulPlan& p, const double* a, const double* b, double* c, int64_t r0,
                int64_t r1) {
  const int64_t m = p.m, n = p.n, k = p.k;
  for (int64_t j0 = 0; j0 < n; j0 += kColBlock) {
    const int64_t j1 = std::min(n, j0 + kColBlock);
    for (int64_t i = r0; i < r1; ++i) std::fill(c + i * n + j0, c + i * n + j1, 0.0);
    for (int64_t k0 = 0; k0 < k; k0 += kDepthBlock) {
      const int64_t k1 = std::min(k, k0 + kDepthBlock);
      for (int64_t i = r0; i < r1; ++i) {
        double* ci = c + i * n;
        if (!p.tb) {
          for (int64_t kk = k0; kk < k1; ++kk) {
            const double av = p.ta ? a[kk * m + i] : a[i * k + kk];
            const double* bk = b + kk * n;
            for (int64_t j = j0; j < j1; ++j) ci[j] += av * bk[j];
          }
        } else {
          for (int64_t j = j0; j < j1; ++j) {
            const double* bj = b + j * k;
            double s = ci[j];
            if (p.ta) {
              for (int64_t kk = k0; kk < k1; ++kk) s += a[kk * m + i] * bj[kk];
            } else {
              const double* ai = a + i * k;
              for (int64_t kk = k0; kk < k1; ++kk) s += ai[kk] * bj[kk];
            }
            ci[j] = s;
          }
        }
      }
    }
  }
}

void matmul_f64(const KernelContext& c, const MatmulPlan& p) {
  const double* a = c.in[0].as<double>();
  const double* b = c.in[1].as<double>();
  double* out = c.out[0].as<double>();
  const int64_t row_blocks = (p.m + kRowBlock - 1) / kRowBlock;
  const int64_t units = p.batch * row_blocks;
#pragma omp parallel for num_threads(std::max(1, c.threads)) schedule(static)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t bi = u / row_blocks;
    const int64_t r0 = (u % row_blocks) * kRowBlock;
    dgemm_rows(p, a + p.a_off[static_cast<size_t>(bi)], b + p.b_off[static_cast<size_t>(bi)],
               out + bi * p.m * p.n, r0, std::min(p.m, r0 + kRowBlock));
  }
}

// matmul, and with `addend` the matmul_add epilogue: out = addend + matmul(a, b). f32 copies
// the addend into out and accumulates the GEMM into it (beta = 1); f64 adds it after the GEMM.
Status matmul_impl(KernelContext& c, const TensorView* addend) {
  const DType dt = c.out[0].dtype;
  const DType in_dt = c.in[0].dtype;
  LJ_CHECK(c.in[1].dtype == in_dt) << "matmul operand dtypes differ";
  const bool bf16 = in_dt == DType::bf16;
  LJ_CHECK(dt == in_dt || (bf16 && dt == DType::f32)) << "matmul output dtype";
  if (!bf16 && dt != DType::f32 && dt != DType::f64) {
    return unimplemented(std::string(op_name(c.node.op)) +
                         " on the CPU supports f32, f64 and bf16, not " + dtype_name(dt));
  }
  const MatmulPlan p = make_plan(c);
  if (addend != nullptr) {
    LJ_CHECK(addend->dtype == dt && addend->dims == c.out[0].dims) << "matmul_add addend";
  }
  if (c.out[0].numel() == 0) return ok_status();
  if (p.k == 0) {
    if (addend != nullptr) {
      std::memcpy(c.out[0].data, addend->data, c.out[0].bytes());
    } else {
      std::memset(c.out[0].data, 0, c.out[0].bytes());
    }
    return ok_status();
  }
  if (bf16) {
    if (addend != nullptr) parallel_copy(c.threads, c.out[0].data, addend->data, c.out[0].bytes());
    matmul_bf16(c, p, addend != nullptr);
    return ok_status();
  }
  if (dt == DType::f32) {
    if (addend != nullptr) std::memcpy(c.out[0].data, addend->data, c.out[0].bytes());
    matmul_f32(c, p, addend != nullptr ? 1.0f : 0.0f);
    return ok_status();
  }
  matmul_f64(c, p);
  if (addend != nullptr) {
    double* out = c.out[0].as<double>();
    const double* add = addend->as<double>();
    const int64_t n = c.out[0].numel();
#pragma omp parallel for num_threads(std::max(1, c.threads)) schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) out[i] += add[i];
  }
  return ok_status();
}

Status matmul_forward(KernelContext& c) {
  return matmul_impl(c, nullptr);
}

// matmul_add(a, b, c): the residual add as the GEMM's epilogue.
Status matmul_add_forward(KernelContext& c) {
  return matmul_impl(c, &c.in[2]);
}

}  // namespace

void register_matmul(KernelTable& t) {
  t[Op::matmul] = matmul_forward;
  t[Op::matmul_add] = matmul_add_forward;
  t.bf16[static_cast<int>(Op::matmul)] = true;
  t.bf16[static_cast<int>(Op::matmul_add)] = true;
}

}  // namespace lj::cpu
