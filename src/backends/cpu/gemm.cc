// The row-major GEMMs of gemm.h.
#include "backends/cpu/gemm.h"

#include <dnnl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <string>
#include <unordered_map>

#include "backends/cpu/sgemm_avx512.h"
#include "core/check.h"

namespace lj::cpu {
namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// One bf16 matmul as oneDNN runs it: descriptors and the primitive, built once per shape.
struct MatmulKey {
  bool ta, tb;
  int64_t m, n, k;
  bool c_f32, accumulate;
  bool operator==(const MatmulKey&) const = default;
};
struct MatmulKeyHash {
  size_t operator()(const MatmulKey& key) const {
    size_t h = std::hash<int64_t>()(key.m);
    for (int64_t v : {key.n, key.k,
                      int64_t{key.ta} | int64_t{key.tb} << 1 | int64_t{key.c_f32} << 2 |
                          int64_t{key.accumulate} << 3}) {
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    }
    return h;
  }
};
struct OneDnnMatmul {
  dnnl::memory::desc a_md, b_md, c_md;
  dnnl::matmul prim;
};

// This thread's primitive for `key` (a kernel may call from inside its own parallel region, so
// each thread keeps its own; a step meets a few dozen shapes). Rebuilding the descriptor and the
// primitive per call cost (oneDNN's primitive cache holds the kernel, not the descriptor) is what
// this saves.
const OneDnnMatmul& onednn_matmul(const MatmulKey& key) {
  thread_local std::unordered_map<MatmulKey, OneDnnMatmul, MatmulKeyHash> cache;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= 512) cache.clear();  // a bound, never met by one model's shapes
  using dnnl::memory;
  const auto [ta, tb, m, n, k, c_f32, accumulate] = key;
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
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, cpu_engine());
  return cache.emplace(key, OneDnnMatmul{a_md, b_md, c_md, dnnl::matmul(pd)}).first->second;
}

}  // namespace

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a,
               const uint16_t* b, void* c, bool c_f32, bool accumulate) {
  if (gemm_bf16_uses_own()) {
    gemm_bf16_avx512(ta, tb, m, n, k, a, b, c, c_f32, accumulate);
    return;
  }
  const OneDnnMatmul& mm = onednn_matmul({ta, tb, m, n, k, c_f32, accumulate});
  using dnnl::memory;
  dnnl::engine& eng = cpu_engine();
  memory am(mm.a_md, eng, const_cast<uint16_t*>(a));
  memory bm(mm.b_md, eng, const_cast<uint16_t*>(b));
  memory cm(mm.c_md, eng, c);
  thread_local dnnl::stream s(eng);
  mm.prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
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
