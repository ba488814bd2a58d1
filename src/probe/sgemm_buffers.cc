#include "probe/sgemm_buffers.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/onednn_info.h"
#include "backends/cpu/sgemm_avx512.h"
#include "runtime/malloc_policy.h"

namespace lj {
namespace {

// oneDNN's f32 blocking per ISA (gemm_info.cpp).
struct Blocking {
  int64_t um, un, bm, bn, bk, bk_traditional;
  double fp_per_cycle;  // 2 FMA ports x 2 FLOPs x vector length (adjust_thread_count)
  int64_t veclen;
};
constexpr Blocking kAvx512{48, 8, 9984, 384, 384, 384, 64.0, 16};
constexpr Blocking kAvx2{24, 4, 10000, 384, 192, 256, 32.0, 8};
constexpr int64_t kSmallK = 48, kBnSmallK = 24;
constexpr int64_t kPage = 4096;
constexpr int64_t kAlign = 128;  // the driver's malloc(size, 128)

int64_t rnd_up(int64_t v, int64_t u) {
  return (v + u - 1) / u * u;
}
int64_t div_up(int64_t v, int64_t u) {
  return (v + u - 1) / u;
}

int64_t k_padd(const Blocking& b, int64_t k) {
  if (k <= b.bk_traditional) return std::max<int64_t>(128, k);
  if (k < 2 * b.bk) return (k + 1) / 2;
  return b.bk;
}
int64_t m_padd(const Blocking& b, int64_t m) {
  return rnd_up(std::min(std::max(m, b.um), b.bm), b.um);
}
int64_t n_padd(const Blocking& b, int64_t n, int64_t k) {
  const int64_t bn = k < kSmallK ? kBnSmallK : b.bn;
  return rnd_up(std::min(std::max(n, b.un), bn), b.un);
}

// The internal (column-major) problem the row-major call becomes: oneDNN swaps the operands.
struct Internal {
  bool transa, transb;
  int64_t m, n, k, lda, ldb, ldc;
};

// gemm_driver's adjust_thread_count for f32.
int thread_count(const Blocking& b, bool avx512, const Internal& p, int threads) {
  if (threads <= 1) return 1;
  if (p.n > 50 && (avx512 ? p.m <= 10 : p.m <= 3)) return threads;
  if (!avx512 && p.m > 10 * p.n && p.n < threads && p.m / threads < b.veclen * 3)
    threads = static_cast<int>(std::max<int64_t>(p.m / b.veclen / 3, 1));
  const double cycles = 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) *
                        static_cast<double>(p.k) / b.fp_per_cycle;
  int i = threads;
  if (threads <= 4) {
    constexpr double kOmp = 3.0e3;
    if (cycles < kOmp) return 1;
    while (i > 1 && !(kOmp * i < cycles * (i - 1))) --i;
  } else {
    if (cycles < 4.0e3 + 2 * 5.0e2) return 1;
    while (i > 1) {
      const double omp = 4.0e3 + i * 5.0e2;
      if (omp * i < cycles * (i - 1)) break;
      i -= i < 10 ? 2 : (i < 30 ? 4 : 8);
    }
  }
  return std::max(i, 1);
}

// gemm_driver's nocopy_checker_avx2.
bool no_copy_avx2(const Internal& p, int nthr) {
  const int64_t m = p.m, n = p.n, k = p.k;
  if (1.0 / static_cast<double>(m) + 1.0 / static_cast<double>(n) >= 0.0038) return true;
  if (m <= 378 && n <= 378 && k >= nthr * 378) return false;
  if (m >= nthr * 378 && k >= nthr * 378) return false;
  if (!p.transb) {
    if (m <= 128 && n <= 128) return true;
    if (n <= nthr * 16) return true;
    if (k <= nthr * 2) return true;
    if (m <= 64 && n >= nthr * 16) return true;
  } else {
    if (m <= 128 && n <= 128) return true;
    if (n <= nthr * 1) return true;
    if (k <= nthr * 1) return true;
  }
  return false;
}

// gemm_driver's nocopy_checker_avx512: true when the no-copy kernels run (no packing buffers).
bool no_copy(const Internal& p, int nthr) {
  const bool nn = !p.transa && !p.transb, nt = !p.transa && p.transb, tn = p.transa && !p.transb;
  const bool lda_bad = p.lda % 256 == 0, ldb_bad = p.ldb % 256 == 0, ldc_bad = p.ldc % 256 == 0;
  const bool lda_verybad = p.lda % 1024 == 0;
  const int64_t m = p.m, n = p.n, k = p.k;
  if (nthr == 1 && tn && m > 100 && ((m < 1200 && n < 200 && k < 1200) || (lda_bad && ldb_bad)))
    return false;
  if (nthr <= 8 && nn && lda_verybad && k > 500 && n > 100) return false;
  if (1.0 / static_cast<double>(m) + 1.0 / static_cast<double>(n) >= 0.00196 &&
      !(lda_verybad && nt))
    return true;
  if (lda_bad || ldb_bad || ldc_bad) {
    if (m >= 32 && n > 16) return false;
    if (m >= 32 && n == 16 && (k >= 6400 || p.transa || m == 4096)) return false;
  }
  if (m <= 378 && n <= 378 && k >= nthr * 378) return false;
  if (m >= nthr * 378 && k >= nthr * 378) return false;
  if (!p.transb) {
    if (m <= nthr * 28) return true;
    if (n <= nthr * 28) return true;
    if (k <= nthr * 1) return true;
  } else {
    if (m <= nthr * 28 && m >= n) return true;
    if (n <= nthr * 28) return true;
    if (k <= nthr * 1) return true;
  }
  return false;
}

int64_t resident(int64_t bytes) {
  return block_resident_bytes(bytes, kAlign);
}

// One thread's buffer in the copy-based kernel driver: A block, B block, two offset vectors. The
// driver fills the whole A block only when B takes several column blocks (n above n_padd);
// otherwise it packs one um-row strip at a time into the block's start, and only those pages are
// ever touched.
// The blocks are sized for kp rows of k but packing writes only the k that exist: below 128
// (k_padd's floor) the rest of each block is never touched.
int64_t driver_buffer(const Blocking& b, int64_t m, int64_t n, int64_t k) {
  const int64_t kp = k_padd(b, k), kt = std::min(k, kp);
  const int64_t mp = m_padd(b, m), np = n_padd(b, n, k);
  const int64_t a_touched = n > np ? mp * kt : std::min(mp, b.um) * kt;
  return resident(4 * (a_touched + kt * np) + 2 * kPage);
}

int64_t call_bytes(const SgemmShape& s, int threads, bool avx512) {
  const Blocking& b = avx512 ? kAvx512 : kAvx2;
  // dnnl_sgemm (row-major) computes cᵀ = op(b)ᵀ op(a)ᵀ in column-major terms.
  const Internal p{s.tb, s.ta, s.n, s.m, s.k, s.tb ? s.k : s.n, s.ta ? s.m : s.k, s.n};
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return 0;
  if (p.m == 1 || p.n == 1) return 0;  // gemv
  const int nthr = thread_count(b, avx512, p, threads);
  if (avx512 ? no_copy(p, nthr) : no_copy_avx2(p, nthr)) return 0;
  if (nthr == 1) return driver_buffer(b, p.m, p.n, p.k);
  // set_thread_opts_nopack for sgemm.
  bool two_d = ((p.n > nthr * 384) || (p.n <= nthr * 192)) && (p.m >= 768);
  if (!avx512 && p.n <= 384 && p.m >= nthr * 384) two_d = false;
  bool shared_a = false;
  if (avx512 ? (p.m >= 1000 && p.n >= nthr * 96) : (p.m >= 1000 && p.n >= 4000)) {
    two_d = false;
    shared_a = true;
  }
  int64_t thr_m = 1, thr_n = 1;
  if (two_d) {
    thr_n = nthr;
    while (thr_n % 2 == 0 && (p.n / nthr > 384 || p.n / thr_n <= 192) && p.m / thr_m >= 768 &&
           thr_m < 4) {
      thr_m *= 2;
      thr_n /= 2;
    }
  } else if (shared_a) {
    // One packed copy of A for every thread (allocated by the first), B blocks per thread.
    int64_t mp = m_padd(b, p.m) * std::min(nthr, 10);
    if (mp > p.m) mp = rnd_up(p.m, b.um);
    const int64_t kp = k_padd(b, p.k);
    const int64_t n_thr = div_up(p.n, nthr);
    const int64_t np = n_padd(b, n_thr, p.k);
    const int64_t shared = resident(4 * mp * std::min(p.k, kp) + kPage);
    // The B block holds the k rows of this k block (not padded to 128).
    const int64_t own = resident(4 * (std::min(p.k, kp) * np + mp + np) + 3 * kPage);
    return shared + nthr * own;
  } else if (p.m > p.n && (p.m >= nthr * b.veclen || p.n < nthr)) {
    thr_m = nthr;
  } else {
    thr_n = nthr;
  }
  return thr_m * thr_n * driver_buffer(b, div_up(p.m, thr_m), div_up(p.n, thr_n), p.k);
}

bool eval(const Graph& g, ValueId v, const SymEnv& env, std::vector<int64_t>* dims) {
  return g.type(v).shape.eval(env, dims) && dims->size() >= 2;
}

int64_t batch_of(const std::vector<int64_t>& d) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < d.size(); ++i) b *= d[i];
  return b;
}

}  // namespace

std::optional<int64_t> sgemm_buffer_bytes(const SgemmShape& s, int threads, SgemmIsa isa) {
  if (isa == SgemmIsa::other) return std::nullopt;
  return call_bytes(s, std::max(threads, 1), isa == SgemmIsa::avx512_core);
}

std::optional<int64_t> graph_sgemm_buffer_bytes(const Graph& g, const SymEnv& env, int threads,
                                                SgemmIsa isa, bool bf16_own) {
  if (isa == SgemmIsa::other) return std::nullopt;
  const bool avx512 = isa == SgemmIsa::avx512_core;
  threads = std::max(threads, 1);
  int64_t most = 0;
  // ljperf's own GEMM (backends/cpu/sgemm_avx512.h) on the shapes it takes: each thread keeps
  // its largest A and B packing buffers for good, on top of oneDNN's per-call ones.
  int64_t own_a = 0, own_b = 0, own_c = 0;
  const auto own = [&](const SgemmShape& s, int call_threads, bool bf16_out) {
    const cpu::SgemmAvx512Buffers o =
        cpu::sgemm_avx512_buffer_bytes(s.m, s.n, s.k, call_threads, bf16_out);
    own_a = std::max(own_a, o.a_bytes);
    own_b = std::max(own_b, o.b_bytes);
    own_c = std::max(own_c, o.c_bytes);
  };
  // nested: the call runs on one thread inside the kernel's own parallel region.
  const auto call_bytes = [&](const SgemmShape& s, int call_threads, bool isa512,
                              bool nested) -> int64_t {
    if (isa512 && cpu::sgemm_avx512_chosen(s.ta, s.tb, s.m, s.n, s.k, nested)) {
      own(s, call_threads, false);
      return 0;
    }
    return lj::call_bytes(s, call_threads, isa512);
  };
  for (const Node& n : g.nodes()) {
    if (n.inputs.size() < 2 || n.outputs.empty()) continue;
    std::vector<int64_t> a, b, out;
    if (n.op == Op::linear_cross_entropy) {
      // x (N, C), w (V, C); chunks of kChunkRows rows (at most 256 MiB of f32 logits), each:
      // logits = x wᵀ, dx = dlogits w, dw += dlogitsᵀ x (backends/cpu/loss.cc).
      if (!eval(g, n.inputs[0], env, &a) || !eval(g, n.inputs[1], env, &b)) continue;
      if (g.type(n.inputs[0]).dtype == DType::bf16 && bf16_own) {
        // The bf16 kernel's three GEMMs per chunk of rows, on all threads (backends/cpu/loss.cc).
        const int64_t rows_total = a[0], dim = a[1], vocab = b[0];
        const int64_t rows = cpu::linear_cross_entropy_chunk_rows(n.attrs, rows_total, vocab);
        for (int64_t m : {rows, rows_total % rows}) {
          if (m <= 0) continue;
          own({false, true, m, vocab, dim}, threads, false);
          own({false, false, m, dim, vocab}, threads, true);
          own({true, false, vocab, dim, m}, threads, false);
        }
        continue;
      }
      if (g.type(n.inputs[0]).dtype != DType::f32) continue;
      // Where the own GEMM runs, the f32 kernel is built from its packing and micro-kernel with
      // every pack in the kernel's workspace (backends/cpu/loss_fused_avx512.h): no GEMM buffers,
      // unless the node asks for the kernel on gemm.h's GEMMs.
      const bool per_block_gemms = n.attrs.i_or("per_block_gemms", 0) != 0;
      if (avx512 && !per_block_gemms) continue;
      const int64_t rows_total = a[0], dim = a[1], vocab = b[0];
      // The kernel's own chunk rows and block width (backends/cpu/loss.cc).
      const int64_t rows = cpu::linear_cross_entropy_chunk_rows(n.attrs, rows_total, vocab);
      // Per vocabulary block, single-threaded inside the kernel's parallel region, dw of the
      // block = dlogits_bᵀ x (the only one of its GEMMs that can go to ljperf's own).
      const int64_t vb = cpu::linear_cross_entropy_vocab_block(n.attrs, vocab, dim);
      for (int64_t m : {rows, rows_total % rows}) {
        if (m <= 0) continue;
        call_bytes({true, false, vb, dim, m}, 1, avx512, true);
        most = std::max({most, lj::call_bytes({false, true, m, vocab, dim}, threads, avx512),
                         lj::call_bytes({false, false, m, dim, vocab}, threads, avx512),
                         lj::call_bytes({true, false, vocab, dim, m}, threads, avx512)});
      }
      continue;
    }
    if (n.op != Op::matmul && n.op != Op::matmul_add) continue;
    const DType in_dtype = g.type(n.inputs[0]).dtype;
    if (in_dtype != DType::f32 && !(in_dtype == DType::bf16 && bf16_own)) continue;
    if (!eval(g, n.inputs[0], env, &a) || !eval(g, n.inputs[1], env, &b) ||
        !eval(g, n.outputs[0], env, &out))
      continue;
    SgemmShape s;
    s.ta = n.attrs.b_or("ta", false);
    s.tb = n.attrs.b_or("tb", false);
    s.m = s.ta ? a[a.size() - 1] : a[a.size() - 2];
    s.k = s.ta ? a[a.size() - 2] : a[a.size() - 1];
    s.n = s.tb ? b[b.size() - 2] : b[b.size() - 1];
    const int64_t batch = batch_of(out);
    const bool a_batched = batch_of(a) > 1, b_batched = batch_of(b) > 1;
    const bool single = !b_batched && (!a_batched || !s.ta);
    const bool across = threads > 1 && (batch % threads == 0 || batch >= 4 * threads);
    if (in_dtype == DType::bf16) {  // every bf16 call goes to the own GEMM (gemm.h)
      if (single) s.m *= batch;
      own(s, single || !across ? threads : 1, g.type(n.outputs[0]).dtype == DType::bf16);
      continue;
    }
    if (!b_batched && (!a_batched || !s.ta)) {
      s.m *= batch;  // one GEMM over the batch rows
      most = std::max(most, call_bytes(s, threads, avx512, false));
    } else if (threads > 1 && (batch % threads == 0 || batch >= 4 * threads)) {
      // One per thread, at once, inside matmul's parallel region.
      most = std::max(most, threads * call_bytes(s, 1, avx512, true));
    } else {
      most = std::max(most, call_bytes(s, threads, avx512, false));
    }
  }
  return most + threads * (resident(own_a) + resident(own_b) + resident(own_c));
}

std::optional<int64_t> host_graph_sgemm_buffer_bytes(const Graph& g, const SymEnv& env,
                                                     int threads) {
  static const SgemmIsa isa = [] {
    const cpu::OneDnnInfo i = cpu::onednn_info();
    return i.isa_avx512 ? SgemmIsa::avx512_core : i.isa_avx2 ? SgemmIsa::avx2 : SgemmIsa::other;
  }();
  return graph_sgemm_buffer_bytes(g, env, threads, isa, cpu::gemm_bf16_uses_own());
}

}  // namespace lj
