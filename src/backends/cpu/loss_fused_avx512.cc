// The fused loss's f32 chunk loop on the in-tree GEMM's pieces (loss_fused_avx512.h).
#include "backends/cpu/loss_fused_avx512.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "backends/cpu/sgemm_avx512.h"
#include "backends/cpu/sgemm_avx512_kernels.h"
#include "backends/cpu/simd.h"
#include "core/check.h"

// Vectors cross only inline functions here (see simd.h).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace lj::cpu {
namespace {

using sgemm_detail::kAStride;
using sgemm_detail::kKcMax;
using sgemm_detail::kMr;
using sgemm_detail::kNr;
using simd::V;
constexpr int W = simd::kWidth<float>;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t div_up(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t up16(int64_t floats) {
  return div_up(floats, 16) * 16;
}

// A GEMM's k blocks: equal, at most the host's kc (sgemm_avx512_blocking). A function of k and
// the host only, so every sum's order is too.
int64_t kc_of(int64_t k) {
  const int64_t most = std::min(sgemm_avx512_blocking().kc, kKcMax);
  return div_up(k, div_up(k, most));
}

// One thread's scratch, offsets in floats.
struct ThreadLayout {
  int64_t xt, xb, a, b, t, p, r, keep, add, ok, mx, sum, total;
};
ThreadLayout thread_layout(const LceAvx512Shape& s) {
  const int64_t rpad = div_up(s.rows, kNr) * kNr, dpad = div_up(s.dim, kNr) * kNr;
  ThreadLayout l{};
  int64_t at = 0;
  const auto take = [&](int64_t floats) {
    const int64_t o = at;
    at += up16(floats);
    return o;
  };
  l.xt = take(rpad * s.dim);   // x[chunk]ᵀ as B panels, every k block of C
  l.xb = take(dpad * s.rows);  // x[chunk] as B panels, every k block of the rows
  l.a = take(kMr * kAStride);  // one A panel, either layout (kc <= kKcMax < kAStride)
  l.b = take(rpad * kKcMax);   // one k block of e_bᵀ as B panels
  l.t = take(s.dim * s.rows);  // w_bᵀ e_bᵀ (C, rows)
  l.p = take(s.dim * s.rows);  // Pᵀ (C, rows)
  l.r = take(s.rows);          // the running row maxima R
  l.keep = take(s.rows);       // Pᵀ's column factors for this block
  l.add = take(s.rows);        // tᵀ's
  l.ok = take(s.rows);         // 1 where the row counts, else 0
  l.mx = take(s.rows);         // the block's column maxima
  l.sum = take(s.rows);        // and sums of exps
  l.total = at;
  return l;
}

// c (mg, ng) = A B + beta c over one k block of kc, B packed (panels kc * kNr apart), columns in
// blocks of nc so B's part stays in L2. A's rows come in panels of kMr: panel(ir, mr) returns
// the panel's start, either packed into a_buf just before use (lda = 0: the packed layouts) so it
// sits in L1 while B's panels stream past it, or A where it lies, lda apart (lda > 0).
template <class Panel>
void gemm_block(bool a_rows, int64_t mg, int64_t ng, int64_t kc, int64_t nc, const Panel& panel,
                int64_t lda, const float* bp, float* c, int64_t ldc, float beta) {
  for (int64_t jc = 0; jc < ng; jc += nc) {
    const int64_t jend = std::min(ng, jc + nc);
    for (int64_t ir = 0; ir < mg; ir += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, mg - ir));
      const float* a = panel(ir, mr);
      for (int64_t jr = jc; jr < jend; jr += kNr) {
        const int nr = static_cast<int>(std::min<int64_t>(kNr, ng - jr));
        float* ct = c + ir * ldc + jr;
        if (lda > 0) {
          sgemm_detail::micro_tile_strided(a_rows, mr, nr, kc, a, lda, bp + jr * kc, ct, ldc, 1.0f,
                                           beta);
        } else {
          sgemm_detail::micro_tile(a_rows, mr, nr, kc, a, bp + jr * kc, ct, ldc, 1.0f, beta);
        }
      }
    }
  }
}

// Whether A may be read in place with rows (or k steps) lda floats apart: when lda spans whole
// 64-byte lines, only if consecutive rows fall in different L1 sets, i.e. gcd(lines, 64) <= 2
// (`small`'s C = 288 is 18 lines; 1024 is 64, every row in one set, and gets packed).
bool in_place_ok(int64_t lda) {
  if (lda * 4 % 64 != 0) return true;
  return std::gcd<int64_t>(lda * 4 / 64, 64) <= 2;
}

// Per column i of the (len, m) block lb: mx[i] its max, lb overwritten by exp(lb - mx[i]) (0
// where ok[i] is 0), sum[i] their sum in row order.
void column_stats(float* lb, int64_t len, int64_t m, const float* ok, float* mx, float* sum) {
  std::fill(mx, mx + m, kNegInf);
  for (int64_t j = 0; j < len; ++j) {
    const float* row = lb + j * m;
    int64_t i = 0;
    for (; i + W <= m; i += W)
      simd::store(mx + i, simd::max(simd::load(mx + i), simd::load(row + i)));
    for (; i < m; ++i) mx[i] = row[i] > mx[i] ? row[i] : mx[i];
  }
  std::fill(sum, sum + m, 0.0f);
  const V<float> zero = simd::splat(0.0f);
  for (int64_t j = 0; j < len; ++j) {
    float* row = lb + j * m;
    int64_t i = 0;
    for (; i + W <= m; i += W) {
      V<float> e = simd::exp_vec<float>(simd::load(row + i) - simd::load(mx + i));
      e = simd::load(ok + i) > zero ? e : zero;
      simd::store(row + i, e);
      simd::store(sum + i, simd::load(sum + i) + e);
    }
    for (; i < m; ++i) {
      const float e = ok[i] > 0.0f ? std::exp(row[i] - mx[i]) : 0.0f;
      row[i] = e;
      sum[i] += e;
    }
  }
}

}  // namespace

LceBlockRange lce_block_range(int t, int threads, int64_t vocab, int64_t vb, int64_t blocks) {
  const auto cut = [&](int u) {
    if (u >= threads) return blocks;
    return std::min(blocks, (u * vocab / threads + vb / 2) / vb);
  };
  return {cut(t), cut(t + 1)};
}

int64_t lce_avx512_scratch_floats(const LceAvx512Shape& s) {
  const int64_t blocks = div_up(s.vocab, s.vb);
  return up16(s.rows * s.vocab) + 2 * up16(s.rows * blocks) +
         std::max(1, s.threads) * thread_layout(s).total;
}

namespace {

// What every step of one chunk reads: the call's arguments, the shared scratch (the logits and
// the per-block row statistics) and the chunk's rows [r0, r0 + m).
struct LceChunk {
  // The call.
  int64_t dim = 0, vocab = 0, vb = 0, blocks = 0;
  const float* x = nullptr;         // (n, C)
  const float* w = nullptr;         // (V, C)
  const int64_t* labels = nullptr;  // (n)
  int64_t ignore = 0;
  float g = 0;
  float* dx = nullptr;        // (n, C)
  float* dw = nullptr;        // (V, C)
  float* row_loss = nullptr;  // (n)
  // The scratch.
  ThreadLayout tl{};
  float* logits = nullptr;      // block b at logits + j0 * m: Lᵀ_b (len, m) dense
  float* blk_m = nullptr;       // (blocks, m): each block's column maxima
  float* blk_s = nullptr;       // (blocks, m): sums, then the row scales c_b
  float* per_thread = nullptr;  // thread u's at per_thread + u * tl.total
  int64_t nc = 0, kc_dim = 0;
  bool in_place = false;  // w_b's rows as A, unpacked
  // The chunk.
  int64_t r0 = 0, m = 0, mpad = 0, dpad = 0, kc_rows = 0;
  const float* xc = nullptr;    // x's rows of the chunk
  const int64_t* yc = nullptr;  // their labels

  float* thread_base(int u) const { return per_thread + u * tl.total; }
};

// One thread's scratch (ThreadLayout's pieces).
struct ThreadScratch {
  ThreadScratch(float* base, const ThreadLayout& tl)
      : xt(base + tl.xt),
        xb(base + tl.xb),
        ap(base + tl.a),
        bp(base + tl.b),
        tt(base + tl.t),
        pp(base + tl.p),
        rr(base + tl.r),
        keep(base + tl.keep),
        add(base + tl.add),
        ok(base + tl.ok),
        mx(base + tl.mx),
        sum(base + tl.sum) {}
  float *xt, *xb, *ap, *bp, *tt, *pp, *rr, *keep, *add, *ok, *mx, *sum;
};

// w_b (at wb) as A over k block [pc, pc + kc): its rows (the logits, ta = false) or its rows as
// k steps (dx, ta = true), where they lie when in_place, else packed into ap.
auto w_panel(const LceChunk& c, const float* wb, float* ap, bool ta, int64_t pc, int64_t kc) {
  return [&c, wb, ap, ta, pc, kc](int64_t ir, int mr) -> const float* {
    if (c.in_place) return ta ? wb + pc * c.dim + ir : wb + ir * c.dim + pc;
    sgemm_detail::pack_a(ta, wb, c.dim, ir, pc, mr, kc, ap);
    return ap;
  };
}

// A thread's start of a chunk: Pᵀ zero, R at -inf; with blocks to do, x[chunk] packed both ways
// and which rows count.
void start_chunk(const LceChunk& c, const ThreadScratch& ts, bool has_blocks) {
  std::fill(ts.pp, ts.pp + c.dim * c.m, 0.0f);
  std::fill(ts.rr, ts.rr + c.m, kNegInf);
  if (!has_blocks) return;
  for (int64_t pc = 0; pc < c.dim; pc += c.kc_dim) {
    sgemm_detail::pack_b(true, c.xc, c.dim, pc, 0, std::min(c.kc_dim, c.dim - pc), c.m,
                         ts.xt + pc * c.mpad);
  }
  for (int64_t pc = 0; pc < c.m; pc += c.kc_rows) {
    sgemm_detail::pack_b(false, c.xc, c.dim, pc, 0, std::min(c.kc_rows, c.m - pc), c.dim,
                         ts.xb + pc * c.dpad);
  }
  for (int64_t i = 0; i < c.m; ++i) ts.ok[i] = c.yc[i] == c.ignore ? 0.0f : 1.0f;
}

// Block b's logits Lᵀ_b = w_b x[chunk]ᵀ, the labels' logits into row_loss, then e_b = exp(L_b -
// its column maxima) in place and the block's maxima and sums into blk_m, blk_s.
void block_logits(const LceChunk& c, const ThreadScratch& ts, int64_t b) {
  const int64_t j0 = b * c.vb, len = std::min(c.vb, c.vocab - j0);
  float* lb = c.logits + j0 * c.m;
  const float* wb = c.w + j0 * c.dim;
  const int64_t w_lda = c.in_place ? c.dim : 0;
  for (int64_t pc = 0; pc < c.dim; pc += c.kc_dim) {
    const int64_t kc = std::min(c.kc_dim, c.dim - pc);
    gemm_block(true, len, c.m, kc, c.nc, w_panel(c, wb, ts.ap, false, pc, kc), w_lda,
               ts.xt + pc * c.mpad, lb, c.m, pc == 0 ? 0.0f : 1.0f);
  }
  for (int64_t i = 0; i < c.m; ++i) {
    const int64_t y = c.yc[i];
    if (y != c.ignore && y >= j0 && y < j0 + len) c.row_loss[c.r0 + i] = -lb[(y - j0) * c.m + i];
  }
  column_stats(lb, len, c.m, ts.ok, ts.mx, ts.sum);
  std::copy(ts.mx, ts.mx + c.m, c.blk_m + b * c.m);
  std::copy(ts.sum, ts.sum + c.m, c.blk_s + b * c.m);
}

// tᵀ = w_bᵀ e_bᵀ over k blocks of the block's columns, then Pᵀ column i = keep_i Pᵀ + add_i tᵀ,
// rescaled to the running max R_i.
void block_accumulate(const LceChunk& c, const ThreadScratch& ts, int64_t b) {
  const int64_t j0 = b * c.vb, len = std::min(c.vb, c.vocab - j0), m = c.m;
  const float* lb = c.logits + j0 * m;
  const float* wb = c.w + j0 * c.dim;
  const int64_t w_lda = c.in_place ? c.dim : 0;
  const int64_t kc_len = kc_of(len);
  for (int64_t pc = 0; pc < len; pc += kc_len) {
    const int64_t kc = std::min(kc_len, len - pc);
    sgemm_detail::pack_b(false, lb, m, pc, 0, kc, m, ts.bp);
    gemm_block(false, c.dim, m, kc, c.nc, w_panel(c, wb, ts.ap, true, pc, kc), w_lda, ts.bp, ts.tt,
               m, pc == 0 ? 0.0f : 1.0f);
  }
  float *keep = ts.keep, *add = ts.add, *rr = ts.rr;
  const float *mx = ts.mx, *ok = ts.ok;
  for (int64_t i = 0; i < m; ++i) {
    keep[i] = 1.0f;
    add[i] = 0.0f;
    if (ok[i] == 0.0f) continue;
    if (mx[i] > rr[i]) {
      keep[i] = rr[i] == kNegInf ? 0.0f : std::exp(rr[i] - mx[i]);
      add[i] = 1.0f;
      rr[i] = mx[i];
    } else {
      add[i] = std::exp(mx[i] - rr[i]);
    }
  }
  for (int64_t d = 0; d < c.dim; ++d) {
    float* pr = ts.pp + d * m;
    const float* tr = ts.tt + d * m;
    int64_t i = 0;
    for (; i + W <= m; i += W) {
      simd::store(pr + i, simd::load(pr + i) * simd::load(keep + i) +
                              simd::load(tr + i) * simd::load(add + i));
    }
    for (; i < m; ++i) pr[i] = keep[i] * pr[i] + add[i] * tr[i];
  }
}

// Row i of the chunk, once every thread's blocks are done: its loss, each block's row scale
// c_b = g exp(m_b - M) / S into blk_s, and dx_i = sum_u exp(R_u - M) g / S P_u - g w_y (threads
// without blocks hold R = -inf).
void row_gradient(const LceChunk& c, int team, int64_t i) {
  const int64_t y = c.yc[i], m = c.m, dim = c.dim;
  float* dxi = c.dx + (c.r0 + i) * dim;
  if (y == c.ignore) {
    std::fill(dxi, dxi + dim, 0.0f);
    for (int64_t b = 0; b < c.blocks; ++b) c.blk_s[b * m + i] = 0.0f;
    return;
  }
  float big = kNegInf;
  for (int64_t b = 0; b < c.blocks; ++b) big = std::max(big, c.blk_m[b * m + i]);
  float total = 0.0f;
  for (int64_t b = 0; b < c.blocks; ++b) {
    total += c.blk_s[b * m + i] * std::exp(c.blk_m[b * m + i] - big);
  }
  c.row_loss[c.r0 + i] += big + std::log(total);
  for (int64_t b = 0; b < c.blocks; ++b) {
    c.blk_s[b * m + i] = c.g * std::exp(c.blk_m[b * m + i] - big) / total;
  }
  std::fill(dxi, dxi + dim, 0.0f);
  for (int u = 0; u < team; ++u) {
    const float ru = (c.thread_base(u) + c.tl.r)[i];
    if (ru == kNegInf) continue;
    const float f = c.g * std::exp(ru - big) / total;
    const float* pu = c.thread_base(u) + c.tl.p + i;
    for (int64_t j = 0; j < dim; ++j) dxi[j] += f * pu[j * m];
  }
  const float* wy = c.w + y * dim;
  for (int64_t j = 0; j < dim; ++j) dxi[j] -= c.g * wy[j];
}

// dw_b (+)= (e_b ⊙ c_b)ᵀ x[chunk], then dw_y -= g x_i for the block's labels, in row order.
void block_dw(const LceChunk& c, const ThreadScratch& ts, int64_t b) {
  const int64_t j0 = b * c.vb, len = std::min(c.vb, c.vocab - j0), m = c.m, dim = c.dim;
  const float* lb = c.logits + j0 * m;
  const float* cb = c.blk_s + b * m;
  float* dwb = c.dw + j0 * dim;
  float* ap = ts.ap;
  for (int64_t pc = 0; pc < m; pc += c.kc_rows) {
    const int64_t kc = std::min(c.kc_rows, m - pc);
    gemm_block(
        true, len, dim, kc, c.nc,
        [&](int64_t ir, int mr) {
          sgemm_detail::pack_a_rows_scaled(lb, m, ir, pc, mr, kc, cb + pc, ap);
          return static_cast<const float*>(ap);
        },
        0, ts.xb + pc * c.dpad, dwb, dim, c.r0 == 0 && pc == 0 ? 0.0f : 1.0f);
  }
  for (int64_t i = 0; i < m; ++i) {
    const int64_t y = c.yc[i];
    if (y == c.ignore || y < j0 || y >= j0 + len) continue;
    const float* xi = c.xc + i * dim;
    float* dwy = dwb + (y - j0) * dim;
    for (int64_t j = 0; j < dim; ++j) dwy[j] -= c.g * xi[j];
  }
}

}  // namespace

void lce_avx512(const LceAvx512Shape& s, int64_t n, const float* x, const float* w,
                const int64_t* labels, int64_t ignore, float g, float* dx, float* dw,
                float* row_loss, float* scratch) {
  LJ_CHECK(reinterpret_cast<uintptr_t>(scratch) % 64 == 0)
      << "linear_cross_entropy: the scratch must be 64-byte aligned";
  LceChunk c;
  c.dim = s.dim;
  c.vocab = s.vocab;
  c.vb = s.vb;
  c.blocks = div_up(s.vocab, s.vb);
  c.x = x;
  c.w = w;
  c.labels = labels;
  c.ignore = ignore;
  c.g = g;
  c.dx = dx;
  c.dw = dw;
  c.row_loss = row_loss;
  c.tl = thread_layout(s);
  c.logits = scratch;
  c.blk_m = c.logits + up16(s.rows * s.vocab);
  c.blk_s = c.blk_m + up16(s.rows * c.blocks);
  c.per_thread = c.blk_s + up16(s.rows * c.blocks);
  c.nc = sgemm_avx512_blocking().nc;
  c.kc_dim = kc_of(s.dim);
  c.in_place = in_place_ok(s.dim);
  for (int64_t r0 = 0; r0 < n; r0 += s.rows) {
    c.r0 = r0;
    c.m = std::min(s.rows, n - r0);
    c.mpad = div_up(c.m, kNr) * kNr;
    c.dpad = div_up(s.dim, kNr) * kNr;
    c.kc_rows = kc_of(c.m);
    c.xc = x + r0 * s.dim;
    c.yc = labels + r0;
#pragma omp parallel num_threads(std::max(1, s.threads))
    {
      const int t = omp_get_thread_num(), team = omp_get_num_threads();
      const LceBlockRange range = lce_block_range(t, team, c.vocab, c.vb, c.blocks);
      const ThreadScratch ts(c.thread_base(t), c.tl);
      start_chunk(c, ts, range.first < range.last);
      for (int64_t b = range.first; b < range.last; ++b) {
        block_logits(c, ts, b);
        block_accumulate(c, ts, b);
      }
#pragma omp barrier
#pragma omp for schedule(static)
      for (int64_t i = 0; i < c.m; ++i) row_gradient(c, team, i);
      for (int64_t b = range.first; b < range.last; ++b) block_dw(c, ts, b);
    }
  }
}

}  // namespace lj::cpu
