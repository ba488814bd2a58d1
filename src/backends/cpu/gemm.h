// Row-major GEMM for the CPU kernels that call it directly (matmul.cc, the fused loss in loss.cc):
//   c (m, n) = alpha * op(a) (m, k) x op(b) (k, n) + beta * c
// with leading dims lda, ldb, ldc (elements between rows as stored), op() transposing when ta /
// tb is set. beta = 0 never reads c (it may hold garbage). f32 goes through oneDNN's dnnl_sgemm,
// or on AVX-512 hosts where oneDNN runs AVX-512 too, for the shape classes sgemm_avx512_chosen()
// names, ljperf's own GEMM (sgemm_avx512.h; gemm_uses_own_sgemm); both run on the calling thread's
// OpenMP thread count (set it with ScopedOmpThreads), single-threaded inside a parallel region; f64
// (gradient checks) is a plain loop kernel, parallel over rows of c, every element summing k in
// increasing order, so its result does not depend on the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace lj::cpu {

// Sets the OpenMP thread count oneDNN sees for the lifetime of the object.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n) : prev_(omp_get_max_threads()) {
    omp_set_num_threads(std::max(1, n));
  }
  ~ScopedOmpThreads() { omp_set_num_threads(prev_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int prev_;
};

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Whether the f32 gemm above sends this shape to ljperf's own AVX-512 GEMM rather than to
// oneDNN: the CPU runs AVX-512F, oneDNN's effective ISA includes avx512_core, and
// sgemm_avx512_chosen(). With oneDNN held below AVX-512 (DNNL_MAX_CPU_ISA=AVX2, or a oneDNN that
// does not know the CPU) every GEMM stays on oneDNN: the process is then an AVX2 host throughout,
// as the host caches (keyed by oneDNN's ISA) and plan/sgemm_buffers assume.
// `nested`: called inside an OpenMP parallel region (gemm below passes omp_in_parallel()).
bool gemm_uses_own_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, bool nested);
// The rule, from its inputs (testable on any host).
bool own_sgemm_allowed(bool cpu_avx512f, bool onednn_avx512_core);
// own_sgemm_allowed() on this host and this process's oneDNN: the own GEMM's pieces may run
// (the fused loss's f32 kernel, loss_fused_avx512.h, is built from them).
bool own_sgemm_enabled();
// bf16 operands a, b (dense row-major: lda = ta ? m : k, ldb = tb ? k : n), f32 accumulation,
// c (m, n) dense in f32 (c_f32) or bf16, rounded once; accumulate: c += instead of c =. oneDNN's
// matmul primitive (AMX or AVX512_BF16, as its dispatcher picks), or where gemm_bf16_uses_own(),
// ljperf's own GEMM with the operands widened to f32 (sgemm_avx512.h gemm_bf16_avx512).
void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a,
               const uint16_t* b, void* c, bool c_f32, bool accumulate);
// Whether gemm_bf16 runs ljperf's own GEMM: on Intel hosts where the own f32 GEMM runs
// (own_sgemm_enabled) and oneDNN has no AMX. There oneDNN runs bf16 on vdpbf16ps, which on the
// Intel class without AMX (Xeon, AVX512_BF16 and AVX512_FP16, 2 vCPUs;
// bench/archive/precision.md, session 16) peaks at half the f32 FMA rate: dot-product probe 168-174
// GFLOP/s against 342-354 for f32 FMA, and the wide model's bf16 GEMMs ran at 129 GFLOP/s against
// 196 for its f32 ones on the own GEMM. AMD Zen 4 (AVX512_BF16, double-rate dot products) and AMX
// hosts keep oneDNN. LJ_BF16_GEMM=own or =onednn overrides the rule (own needs
// own_sgemm_enabled). Fixed for the process, so every step of a run takes the same path.
bool gemm_bf16_uses_own();
// The rule from its inputs (testable on any host); `warning` is non-empty for an env value it
// ignored.
struct Bf16Gemm {
  bool own = false;
  std::string warning;
};
Bf16Gemm bf16_gemm_rule(bool own_sgemm, bool onednn_amx, bool intel, const char* env);
// `threads`: the OpenMP threads of the row loop.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc,
          int threads);

}  // namespace lj::cpu
