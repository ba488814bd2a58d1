// The row-major GEMMs of gemm.h.
#include "backends/cpu/gemm.h"

#include <dnnl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <string>

#include "backends/cpu/sgemm_avx512.h"
#include "core/check.h"

namespace lj::cpu {
namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

}  // namespace

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a,
               const uint16_t* b, void* c, bool c_f32, bool accumulate) {
  if (gemm_bf16_uses_own()) {
    gemm_bf16_avx512(ta, tb, m, n, k, a, b, c, c_f32, accumulate);
    return;
  }
  using dnnl::memory;
  const memory::data_type c_dt = c_f32 ? memory::data_type::f32 : memory::data_type::bf16;
  const memory::desc a_md({m, k}, memory::data_type::bf16,
                          ta ? memory::dims{1, m} : memory::dims{k, 1});
  const memory::desc b_md({k, n}, memory::data_type::bf16,
                          tb ? memory::dims{1, k} : memory::dims{n, 1});
  const memory::desc c_md({m, n}, c_dt, memory::dims{n, 1});
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  dnnl::engine& eng = cpu_engine();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
  const dnnl::matmul prim(pd);
  dnnl::stream s(eng);
  memory am(a_md, eng, const_cast<uint16_t*>(a));
  memory bm(b_md, eng, const_cast<uint16_t*>(b));
  memory cm(c_md, eng, c);
  prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.wait();
}

bool own_sgemm_allowed(bool cpu_avx512f, bool onednn_avx512_core) {
  return cpu_avx512f && onednn_avx512_core;
}

bool own_sgemm_enabled() {
  // oneDNN fixes its effective ISA on first use (DNNL_MAX_CPU_ISA is read once), so once is enough.
  static const bool allowed = [] {
    const auto bits = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const auto core = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
    return own_sgemm_allowed(sgemm_avx512_available(), (bits & core) == core);
  }();
  return allowed;
}

Bf16Gemm bf16_gemm_rule(bool own_sgemm, bool onednn_amx, bool intel, const char* env) {
  if (env != nullptr && std::strcmp(env, "onednn") == 0) return {false, ""};
  if (env != nullptr && std::strcmp(env, "own") == 0) {
    if (own_sgemm) return {true, ""};
    return {false, "LJ_BF16_GEMM=own needs AVX-512 (CPU and oneDNN); using oneDNN"};
  }
  std::string warning;
  if (env != nullptr && *env != '\0') {
    warning = std::string("LJ_BF16_GEMM='") + env + "' is neither own nor onednn; ignored";
  }
  return {own_sgemm && intel && !onednn_amx, warning};
}

bool gemm_bf16_uses_own() {
  static const bool own = [] {
    const auto bits = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const auto amx = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_amx);
    const Bf16Gemm r = bf16_gemm_rule(own_sgemm_enabled(), (bits & amx) == amx,
                                      __builtin_cpu_is("intel") != 0, std::getenv("LJ_BF16_GEMM"));
    if (!r.warning.empty()) std::fprintf(stderr, "warning: %s\n", r.warning.c_str());
    return r.own;
  }();
  return own;
}

bool gemm_uses_own_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, bool nested) {
  return own_sgemm_enabled() && sgemm_avx512_chosen(ta, tb, m, n, k, nested);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (gemm_uses_own_sgemm(ta, tb, m, n, k, omp_in_parallel() != 0)) {
    sgemm_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
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
