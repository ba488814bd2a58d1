// matmul and matmul_add through cuBLASLt: out (batch..., M, N) = op(a) (batch..., M, K) x
// op(b) (batch..., K, N) [+ c], op() transposing the last two dims when ta / tb is set, batch
// dims broadcast numpy-style (backends/cpu/matmul.cc's contract). f32 (CUBLAS_COMPUTE_32F: no
// TF32, so it agrees with the CPU to f32 rounding) and bf16 operands with f32 accumulation and
// one rounding of the output. matmul_add passes c as cuBLASLt's C with beta = 1 (the residual
// add is the GEMM's epilogue, no extra pass).
//
// Row-major on a column-major library: out^T = op(b)^T op(a)^T, so cuBLASLt's A is b's buffer
// and its B is a's, each described as stored. Batches, in order of preference: b without batch
// and a not transposed (a linear layer): ONE GEMM of (batch*M, K); equal or single batches:
// one strided-batched call (stride 0 for the operand without batch); any other broadcast: one
// call per output matrix.
#include <cublasLt.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels.h"

namespace lj::cuda {
namespace {

Status lt_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return ok_status();
  return internal_error(std::string(what) + ": cuBLASLt status " +
                        std::to_string(static_cast<int>(s)));
}
#define LJ_LT(expr) LJ_RETURN_IF_ERROR(lt_status((expr), #expr))

// Owns cuBLASLt descriptors for one call.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    for (auto* l : {a, b, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

Status layout(cublasLtMatrixLayout_t* l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
              int batch, int64_t stride) {
  LJ_LT(cublasLtMatrixLayoutCreate(l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                   ld));
  if (batch > 1) {
    LJ_LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                           sizeof batch));
    LJ_LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                           sizeof stride));
  }
  return ok_status();
}

// One (possibly strided-batched) row-major GEMM: out (M, N) = op(a) op(b) [+ c], elements.
struct Gemm {
  int64_t m, n, k;
  bool ta, tb;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_out = 0;
};

Status run_gemm(const Gemm& g, cudaDataType_t t, const void* a, const void* b, const void* c,
                void* out, const KernelEnv& env, cudaDataType_t out_t) {
  Descs ds;
  LJ_LT(cublasLtMatmulDescCreate(&ds.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is b
  const cublasOperation_t op_b = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is a
  LJ_LT(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  LJ_LT(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  // b stored (K, N) or, with tb, (N, K); a stored (M, K) or, with ta, (K, M): column-major views.
  LJ_RETURN_IF_ERROR(g.tb ? layout(&ds.a, t, g.k, g.n, g.k, g.batch, g.stride_b)
                          : layout(&ds.a, t, g.n, g.k, g.n, g.batch, g.stride_b));
  LJ_RETURN_IF_ERROR(g.ta ? layout(&ds.b, t, g.m, g.k, g.m, g.batch, g.stride_a)
                          : layout(&ds.b, t, g.k, g.m, g.k, g.batch, g.stride_a));
  LJ_RETURN_IF_ERROR(layout(&ds.c, out_t, g.n, g.m, g.n, g.batch, g.stride_out));
  LJ_RETURN_IF_ERROR(layout(&ds.d, out_t, g.n, g.m, g.n, g.batch, g.stride_out));
  LJ_LT(cublasLtMatmulPreferenceCreate(&ds.pref));
  const uint64_t ws = env.gemm_workspace_bytes;
  LJ_LT(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws));
  // The pointers' real alignment (a batch's matrices may sit at any element offset).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> aligned[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c != nullptr ? c : out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, out}};
  for (const auto& [attr, p] : aligned) {
    uint32_t align = 256;
    while (align > 1 && reinterpret_cast<uintptr_t>(p) % align != 0) align /= 2;
    LJ_LT(cublasLtMatmulPreferenceSetAttribute(ds.pref, attr, &align, sizeof align));
  }
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  LJ_LT(cublasLtMatmulAlgoGetHeuristic(env.lt, ds.op, ds.a, ds.b, ds.c, ds.d, ds.pref, 1, &heur,
                                       &found));
  if (found == 0) {
    return internal_error("cuBLASLt has no algorithm for a " + std::to_string(g.m) + "x" +
                          std::to_string(g.n) + "x" + std::to_string(g.k) + " GEMM");
  }
  const float alpha = 1.0f, beta = c != nullptr ? 1.0f : 0.0f;
  LJ_LT(cublasLtMatmul(env.lt, ds.op, &alpha, b, ds.a, a, ds.b, &beta, c != nullptr ? c : out, ds.c,
                       out, ds.d, &heur.algo, env.gemm_workspace, env.gemm_workspace_bytes,
                       env.stream));
  return ok_status();
}

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

Status matmul_impl(KernelContext& c, const KernelEnv& env, bool add) {
  const TensorView &a = c.in[0], &b = c.in[1];
  TensorView& out = c.out[0];
  const bool ta = c.attrs().b_or("ta", false), tb = c.attrs().b_or("tb", false);
  cudaDataType_t t;
  if (a.dtype == DType::f32) {
    t = CUDA_R_32F;
  } else if (a.dtype == DType::bf16) {
    t = CUDA_R_16BF;
  } else {
    return unimplemented(std::string("CUDA matmul: dtype ") + dtype_name(a.dtype) +
                             " has no kernel (f32 and bf16 do)",
                         "run with --device cpu");
  }
  const int64_t m = out.dim(-2), n = out.dim(-1);
  const int64_t k = ta ? a.dim(-2) : a.dim(-1);
  const size_t es = static_cast<size_t>(dtype_size(a.dtype));
  const void* cp = add ? c.in[2].data : nullptr;
  if (out.numel() == 0) return ok_status();
  if (k == 0) {
    // No terms: zeros, or c.
    if (cp != nullptr) {
      LJ_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(out.data, cp, out.bytes(), cudaMemcpyDeviceToDevice, env.stream));
    } else {
      LJ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.data, 0, out.bytes(), env.stream));
    }
    return ok_status();
  }
  const size_t ob = out.dims.size() - 2;
  const int64_t batch = prod(out.dims, 0, ob);
  const int64_t a_batch = prod(a.dims, 0, a.dims.size() - 2);
  const int64_t b_batch = prod(b.dims, 0, b.dims.size() - 2);
  Gemm g{m, n, k, ta, tb};
  if (b_batch == 1 && !ta && a_batch == batch) {
    g.m = batch * m;
    return run_gemm(g, t, a.data, b.data, cp, out.data, env, t);
  }
  if ((a_batch == batch || a_batch == 1) && (b_batch == batch || b_batch == 1) &&
      batch <= (1LL << 30)) {
    g.batch = static_cast<int>(batch);
    g.stride_a = a_batch == 1 ? 0 : m * k;
    g.stride_b = b_batch == 1 ? 0 : k * n;
    g.stride_out = m * n;
    return run_gemm(g, t, a.data, b.data, cp, out.data, env, t);
  }
  // General broadcast: one GEMM per output matrix, offsets from the broadcast batch index.
  const size_t ab = a.dims.size() - 2, bb = b.dims.size() - 2;
  for (int64_t o = 0; o < batch; ++o) {
    int64_t rem = o, ao = 0, bo = 0, astride = 1, bstride = 1;
    for (size_t ax = ob; ax-- > 0;) {
      const int64_t idx = rem % out.dims[ax];
      rem /= out.dims[ax];
      const size_t from_end = ob - ax;
      if (from_end <= ab) {
        const int64_t dim = a.dims[ab - from_end];
        if (dim != 1) ao += idx * astride;
        astride *= dim;
      }
      if (from_end <= bb) {
        const int64_t dim = b.dims[bb - from_end];
        if (dim != 1) bo += idx * bstride;
        bstride *= dim;
      }
    }
    const char* ap = static_cast<const char*>(a.data) + static_cast<size_t>(ao * m * k) * es;
    const char* bp = static_cast<const char*>(b.data) + static_cast<size_t>(bo * k * n) * es;
    char* op = static_cast<char*>(out.data) + static_cast<size_t>(o * m * n) * es;
    const char* cpo = cp == nullptr
                          ? nullptr
                          : static_cast<const char*>(cp) + static_cast<size_t>(o * m * n) * es;
    LJ_RETURN_IF_ERROR(run_gemm(g, t, ap, bp, cpo, op, env, t));
  }
  return ok_status();
}

Status matmul_forward(KernelContext& c, const KernelEnv& env) {
  return matmul_impl(c, env, false);
}
Status matmul_add_forward(KernelContext& c, const KernelEnv& env) {
  return matmul_impl(c, env, true);
}

}  // namespace

Status gemm(const GemmShape& s, DType operands, DType result, const void* a, const void* b,
            const void* c, void* out, const KernelEnv& env) {
  auto type_of = [](DType d) { return d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; };
  LJ_CHECK((operands == DType::f32 || operands == DType::bf16) &&
           (result == DType::f32 || result == operands))
      << "CUDA gemm: " << dtype_name(operands) << " -> " << dtype_name(result);
  if (s.m == 0 || s.n == 0) return ok_status();
  Gemm g{s.m, s.n, s.k, s.ta, s.tb};
  return run_gemm(g, type_of(operands), a, b, c, out, env, type_of(result));
}

void register_gemm(CudaKernelTable& t) {
  t[Op::matmul] = matmul_forward;
  t[Op::matmul_add] = matmul_add_forward;
}

}  // namespace lj::cuda
