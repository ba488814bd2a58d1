// The row-major GEMMs of gemm.h.
#include "backends/cpu/gemm.h"

#include <dnnl.h>

#include "core/check.h"

namespace lj::cpu {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  LJ_CHECK(st == dnnl_success) << "dnnl_sgemm failed with status " << static_cast<int>(st)
                               << " for m=" << m << " n=" << n << " k=" << k;
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc,
          int threads) {
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    double* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * lda + i] : a[i * lda + p];
        const double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
        s += av * bv;
      }
      ci[j] = beta == 0 ? alpha * s : alpha * s + beta * ci[j];
    }
  }
}

}  // namespace lj::cpu
