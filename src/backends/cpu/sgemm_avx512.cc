// The blocking, threading and buffers of the in-tree GEMM (sgemm_avx512.h); the AVX-512 code is
// in sgemm_avx512_kernels.cc.
#include "backends/cpu/sgemm_avx512.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/cpu_util.h"
#include "backends/cpu/sgemm_avx512_kernels.h"
#include "core/check.h"
#include "core/dtype.h"

namespace lj::cpu {
namespace {

using sgemm_detail::kMr;
using sgemm_detail::kNr;

int64_t div_up(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t rnd_up(int64_t a, int64_t b) {
  return div_up(a, b) * b;
}

int64_t cache_bytes(int name, int64_t fallback) {
  const long v = sysconf(name);
  return v > 0 ? static_cast<int64_t>(v) : fallback;
}

// Equal blocks of at most `most` (a multiple of `unit`), each rounded up to `unit`.
int64_t block_of(int64_t extent, int64_t most, int64_t unit) {
  if (extent <= most) return rnd_up(extent, unit);
  return rnd_up(div_up(extent, div_up(extent, most)), unit);
}

// What one call's thread works on: its rows [i0, i0 + m) and columns [j0, j0 + n).
struct Part {
  int64_t i0, m, j0, n;
};

// Threads the call uses and how it cuts: rows when m >= n, else columns, whole panels each.
struct Split {
  int threads;
  bool rows;
  int64_t per;  // rows or columns per thread (a multiple of kMr or kNr)
};

Split split_of(int64_t m, int64_t n, int64_t k, int threads) {
  // Below ~2 MFLOP a fork costs more than it saves.
  if (threads <= 1 ||
      static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < (1 << 20)) {
    return {1, true, m};
  }
  const bool rows = m >= n;
  const int64_t unit = rows ? kMr : kNr;
  const int64_t panels = div_up(rows ? m : n, unit);
  const int64_t per = div_up(panels, std::min<int64_t>(threads, panels)) * unit;
  return {static_cast<int>(div_up(rows ? m : n, per)), rows, per};
}

// A thread's packing buffer, 64-byte aligned, grown on demand and kept until the thread exits.
struct PackBuffer {
  float* data = nullptr;
  int64_t floats = 0;
  ~PackBuffer() { std::free(data); }
  float* at_least(int64_t n) {
    if (n > floats) {
      std::free(data);
      data = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(rnd_up(n, 16)) * 4));
      LJ_CHECK(data != nullptr) << "sgemm: cannot allocate a " << n * 4 << "-byte packing buffer";
      floats = rnd_up(n, 16);
    }
    return data;
  }
};

struct Sizes {
  int64_t mc, kc, nc;
};

Sizes sizes_of(const SgemmBlocking& b, int64_t m, int64_t n, int64_t k) {
  const int64_t kc_most = std::min(b.kc, sgemm_detail::kKcMax);
  return {block_of(m, b.mc, kMr), div_up(k, div_up(k, kc_most)), block_of(n, b.nc, kNr)};
}

// Enough for either A layout.
int64_t a_floats(const Sizes& s) {
  return s.mc / kMr *
         std::max(sgemm_detail::a_panel_floats(true, s.kc),
                  sgemm_detail::a_panel_floats(false, s.kc));
}
int64_t b_floats(const Sizes& s) {
  return s.nc * s.kc;
}

// c = beta * c over the m x n block (k = 0 or alpha = 0); beta = 0 writes zeros.
void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
  }
}

// The thread's packing buffers, shared by every source type (so a thread holds one A, one B and,
// for bf16 outputs, one C buffer whatever it multiplies).
PackBuffer& a_buffer() {
  thread_local PackBuffer b;
  return b;
}
PackBuffer& b_buffer() {
  thread_local PackBuffer b;
  return b;
}
PackBuffer& c_buffer() {
  thread_local PackBuffer b;
  return b;
}

// The f32 sum of one (row block, column block) of c in the C buffer, row stride nc.
int64_t c_floats(const Sizes& s) {
  return s.mc * s.nc;
}

// c (mc x nc, row stride ldc) = alpha * A B + beta * c over one k block of kc, A and B packed
// (ap, bp). Row panels outer: a's 14-row panel stays in L1 while b's panels stream from L2.
void block_tiles(bool ta, int64_t mc, int64_t nc, int64_t kc, const float* ap, const float* bp,
                 float* c, int64_t ldc, float alpha, float beta) {
  const int64_t a_step = sgemm_detail::a_panel_floats(ta, kc);
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    const int mr = static_cast<int>(std::min<int64_t>(kMr, mc - ir));
    const float* a_panel = ap + ir / kMr * a_step;
    for (int64_t jr = 0; jr < nc; jr += kNr) {
      const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - jr));
      sgemm_detail::micro_tile(!ta, mr, nr, kc, a_panel, bp + jr * kc, c + ir * ldc + jr, ldc,
                               alpha, beta);
    }
  }
}

// One thread's part, single-threaded, into f32 c. T: the operands' type (float, or bf16 bits).
template <class T>
void run_part(bool ta, bool tb, const Part& part, int64_t k, float alpha, const T* a, int64_t lda,
              const T* b, int64_t ldb, float beta, float* c, int64_t ldc,
              const SgemmBlocking& blk) {
  const Sizes s = sizes_of(blk, part.m, part.n, k);
  float* ap = a_buffer().at_least(a_floats(s));
  float* bp = b_buffer().at_least(b_floats(s));
  for (int64_t jc = 0; jc < part.n; jc += s.nc) {
    const int64_t nc = std::min(s.nc, part.n - jc);
    for (int64_t pc = 0; pc < k; pc += s.kc) {
      const int64_t kc = std::min(s.kc, k - pc);
      const float beta_k = pc == 0 ? beta : 1.0f;
      sgemm_detail::pack_b(tb, b, ldb, pc, part.j0 + jc, kc, nc, bp);
      for (int64_t ic = 0; ic < part.m; ic += s.mc) {
        const int64_t mc = std::min(s.mc, part.m - ic);
        sgemm_detail::pack_a(ta, a, lda, part.i0 + ic, pc, mc, kc, ap);
        block_tiles(ta, mc, nc, kc, ap, bp, c + (part.i0 + ic) * ldc + part.j0 + jc, ldc, alpha,
                    beta_k);
      }
    }
  }
}

// One thread's part of a bf16 product into bf16 c (ldc = n): each (column block, row block)
// sums every k block in the C buffer in f32, then rounds once into c, adding c's own value
// first when accumulating. B is packed again per row block (one row block per part for the
// step's shapes: mc is most of L2).
void run_part_bf16_out(bool ta, bool tb, const Part& part, int64_t k, const uint16_t* a,
                       int64_t lda, const uint16_t* b, int64_t ldb, bool accumulate, uint16_t* c,
                       int64_t ldc, const SgemmBlocking& blk) {
  const Sizes s = sizes_of(blk, part.m, part.n, k);
  float* ap = a_buffer().at_least(a_floats(s));
  float* bp = b_buffer().at_least(b_floats(s));
  float* cp = c_buffer().at_least(c_floats(s));
  for (int64_t jc = 0; jc < part.n; jc += s.nc) {
    const int64_t nc = std::min(s.nc, part.n - jc);
    for (int64_t ic = 0; ic < part.m; ic += s.mc) {
      const int64_t mc = std::min(s.mc, part.m - ic);
      for (int64_t pc = 0; pc < k; pc += s.kc) {
        const int64_t kc = std::min(s.kc, k - pc);
        sgemm_detail::pack_b(tb, b, ldb, pc, part.j0 + jc, kc, nc, bp);
        sgemm_detail::pack_a(ta, a, lda, part.i0 + ic, pc, mc, kc, ap);
        block_tiles(ta, mc, nc, kc, ap, bp, cp, s.nc, 1.0f, pc == 0 ? 0.0f : 1.0f);
      }
      for (int64_t i = 0; i < mc; ++i) {
        float* src = cp + i * s.nc;
        uint16_t* dst = c + (part.i0 + ic + i) * ldc + part.j0 + jc;
        if (accumulate) {
          for (int64_t j = 0; j < nc; ++j) src[j] += bf16_to_f32(dst[j]);
        }
        f32_to_bf16_row(src, dst, nc);
      }
    }
  }
}

// The thread split of an m x n x k call and each thread's part.
struct Plan {
  Split sp;
  int64_t m, n;
  Part part(int t) const {
    const int64_t lo = t * sp.per;
    return sp.rows ? Part{lo, std::min(sp.per, m - lo), 0, n}
                   : Part{0, m, lo, std::min(sp.per, n - lo)};
  }
};

Plan plan_of(int64_t m, int64_t n, int64_t k) {
  return {split_of(m, n, k, omp_in_parallel() ? 1 : omp_get_max_threads()), m, n};
}

// Runs f(part) for every thread's part: inline for one, else in a parallel region.
template <class F>
void for_parts(const Plan& p, F f) {
  if (p.sp.threads == 1) {
    f(Part{0, p.m, 0, p.n});
    return;
  }
#pragma omp parallel for num_threads(p.sp.threads) schedule(static, 1)
  for (int t = 0; t < p.sp.threads; ++t) f(p.part(t));
}

}  // namespace

bool sgemm_avx512_available() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return ok;
}

SgemmBlocking sgemm_avx512_blocking() {
  static const SgemmBlocking b = [] {
    const int64_t l1 = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 32 << 10);
    const int64_t l2 = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 1 << 20);
    SgemmBlocking r;
    // kc: the A panel (kMr x kc, row stride kAStride) fills under half of L1, at most kKcMax.
    r.kc = std::clamp<int64_t>(l1 / 2 / (kMr * 4) / 8 * 8, 16, sgemm_detail::kKcMax);
    // nc: the B block (kc x nc), which every A panel streams through, is half of L2.
    r.nc = std::max<int64_t>(kNr, l2 / 2 / (r.kc * 4) / kNr * kNr);
    // mc: the A block (mc x kc) the other half.
    r.mc = std::max<int64_t>(kMr, l2 / 2 / (r.kc * 4) / kMr * kMr);
    return r;
  }();
  return b;
}

void sgemm_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                  const SgemmBlocking* blocking) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  const SgemmBlocking blk = blocking ? *blocking : sgemm_avx512_blocking();
  for_parts(plan_of(m, n, k), [&](const Part& part) {
    run_part(ta, tb, part, k, alpha, a, lda, b, ldb, beta, c, ldc, blk);
  });
}

void gemm_bf16_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a,
                      const uint16_t* b, void* c, bool c_f32, bool accumulate,
                      const SgemmBlocking* blocking) {
  if (m <= 0 || n <= 0) return;
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  if (k <= 0) {
    if (accumulate) return;
    std::memset(c, 0, static_cast<size_t>(m * n) * (c_f32 ? 4 : 2));
    return;
  }
  const SgemmBlocking blk = blocking ? *blocking : sgemm_avx512_blocking();
  for_parts(plan_of(m, n, k), [&](const Part& part) {
    if (c_f32) {
      run_part(ta, tb, part, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f,
               static_cast<float*>(c), n, blk);
    } else {
      run_part_bf16_out(ta, tb, part, k, a, lda, b, ldb, accumulate, static_cast<uint16_t*>(c), n,
                        blk);
    }
  });
}

bool sgemm_avx512_chosen(bool ta, bool tb, int64_t m, int64_t n, int64_t k, bool nested) {
  // Not nested (a layer's GEMM on all the step's threads): every transpose case with each
  // dimension at least 128. dnnl_sgemm allocates its packing buffers on every call, and at these
  // sizes glibc maps them fresh and the kernel zeroes them page by page: 8k page faults per
  // `small` step and 194k (0.26 s of system CPU) per wider-model step, which a micro-benchmark
  // calling one shape in a loop never sees (glibc's mmap threshold rises after the first free).
  // This GEMM keeps its buffers. In the step (session 9, bench/archive/speed.md, interleaved,
  // paired medians): `small` B8 compiled 1.021x tokens/s, eager 1.034x, the wider model compiled
  // 1.075x (1.045-1.085, every round), its page faults per step 194k -> 30k. Alone and hot it
  // runs 0.93-1.0x of oneDNN on the forward (b transposed) and dX shapes (session 6). Below 128
  // (`small`'s kv projections, N = 96) oneDNN's no-copy kernels allocate nothing: 0.87-0.92x
  // alone, and taking them too measured 0.99x in the step.
  if (!nested) return std::min({m, n, k}) >= 128;
  // Nested (one thread inside a parallel region; faults are rare there): the classes measured
  // faster than dnnl_sgemm in three interleaved runs (session 6, bench/micro/sgemm_ab.sh, 1
  // thread): op(a) = aᵀ with b as stored (the weight gradients dW = dYᵀ X, both packs plain
  // copies), every dimension at least 256 and n at most 1024: 768 x 288 x 2048 1.03x,
  // 288 x 768 x 2048 1.03-1.04x, 512 x 288 x 256 1.04x, 2816 x 1024 x 1024 1.00x. Lost:
  // 96 x 288 x 2048 (0.86-0.92x) and 1024 x 2816 x 1024 (0.96-0.99x). The forward (b transposed)
  // and dX (neither) shapes measured 0.87-1.08x, mostly below 1, as did the fused loss's logits
  // and dx blocks inside it (session 7): they stay on oneDNN.
  return ta && !tb && std::min({m, n, k}) >= 256 && n <= 1024;
}

SgemmAvx512Buffers sgemm_avx512_buffer_bytes(int64_t m, int64_t n, int64_t k, int threads,
                                             bool bf16_out) {
  if (m <= 0 || n <= 0 || k <= 0) return {};
  const Split sp = split_of(m, n, k, std::max(threads, 1));
  const Sizes s = sizes_of(sgemm_avx512_blocking(), sp.rows ? std::min(sp.per, m) : m,
                           sp.rows ? n : std::min(sp.per, n), k);
  return {rnd_up(a_floats(s), 16) * 4, rnd_up(b_floats(s), 16) * 4,
          bf16_out ? rnd_up(c_floats(s), 16) * 4 : 0};
}

}  // namespace lj::cpu
