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

void lce_avx512(const LceAvx512Shape& s, int64_t n, const float* x, const float* w,
                const int64_t* labels, int64_t ignore, float g, float* dx, float* dw,
                float* row_loss, float* scratch) {
  LJ_CHECK(reinterpret_cast<uintptr_t>(scratch) % 64 == 0)
      << "linear_cross_entropy: the scratch must be 64-byte aligned";
  const int64_t dim = s.dim, vocab = s.vocab, vb = s.vb, blocks = div_up(vocab, vb);
  const ThreadLayout tl = thread_layout(s);
  float* logits = scratch;  // block b at logits + j0 * m: Lᵀ_b (len, m) dense
  float* blk_m = logits + up16(s.rows * vocab);  // (blocks, m): each block's column maxima
  float* blk_s = blk_m + up16(s.rows * blocks);  // (blocks, m): sums, then the row scales c_b
  float* per_thread = blk_s + up16(s.rows * blocks);
  const auto mine = [&](int u) { return per_thread + u * tl.total; };
  const int64_t nc = sgemm_avx512_blocking().nc, kc_dim = kc_of(dim);
  const bool in_place = in_place_ok(dim);  // w_b's rows as A, unpacked
  for (int64_t r0 = 0; r0 < n; r0 += s.rows) {
    const int64_t m = std::min(s.rows, n - r0);
    const int64_t mpad = div_up(m, kNr) * kNr, dpad = div_up(dim, kNr) * kNr, kc_rows = kc_of(m);
    const float* xc = x + r0 * dim;
    const int64_t* yc = labels + r0;
#pragma omp parallel num_threads(std::max(1, s.threads))
    {
      const int t = omp_get_thread_num(), team = omp_get_num_threads();
      const LceBlockRange range = lce_block_range(t, team, vocab, vb, blocks);
      float* base = mine(t);
      float *xt = base + tl.xt, *xb = base + tl.xb, *ap = base + tl.a, *bp = base + tl.b;
      float *tt = base + tl.t, *pp = base + tl.p, *rr = base + tl.r, *keep = base + tl.keep;
      float *add = base + tl.add, *ok = base + tl.ok, *mx = base + tl.mx, *sum = base + tl.sum;
      std::fill(pp, pp + dim * m, 0.0f);
      std::fill(rr, rr + m, kNegInf);
      if (range.first < range.last) {
        for (int64_t pc = 0; pc < dim; pc += kc_dim) {
          sgemm_detail::pack_b(true, xc, dim, pc, 0, std::min(kc_dim, dim - pc), m, xt + pc * mpad);
        }
        for (int64_t pc = 0; pc < m; pc += kc_rows) {
          sgemm_detail::pack_b(false, xc, dim, pc, 0, std::min(kc_rows, m - pc), dim,
                               xb + pc * dpad);
        }
        for (int64_t i = 0; i < m; ++i) ok[i] = yc[i] == ignore ? 0.0f : 1.0f;
      }
      for (int64_t b = range.first; b < range.last; ++b) {
        const int64_t j0 = b * vb, len = std::min(vb, vocab - j0);
        float* lb = logits + j0 * m;
        const float* wb = w + j0 * dim;
        // w_b as A over k block [pc, pc + kc): its rows (the logits, ta = false) or its rows as
        // k steps (dx, ta = true), where they lie when in_place, else packed into ap.
        const auto w_panel = [&](bool ta, int64_t pc, int64_t kc) {
          return [&, ta, pc, kc](int64_t ir, int mr) -> const float* {
            if (in_place) return ta ? wb + pc * dim + ir : wb + ir * dim + pc;
            sgemm_detail::pack_a(ta, wb, dim, ir, pc, mr, kc, ap);
            return ap;
          };
        };
        const int64_t w_lda = in_place ? dim : 0;
        // Lᵀ_b = w_b x[chunk]ᵀ.
        for (int64_t pc = 0; pc < dim; pc += kc_dim) {
          const int64_t kc = std::min(kc_dim, dim - pc);
          gemm_block(true, len, m, kc, nc, w_panel(false, pc, kc), w_lda, xt + pc * mpad, lb, m,
                     pc == 0 ? 0.0f : 1.0f);
        }
        for (int64_t i = 0; i < m; ++i) {
          if (yc[i] != ignore && yc[i] >= j0 && yc[i] < j0 + len) {
            row_loss[r0 + i] = -lb[(yc[i] - j0) * m + i];
          }
        }
        column_stats(lb, len, m, ok, mx, sum);
        std::copy(mx, mx + m, blk_m + b * m);
        std::copy(sum, sum + m, blk_s + b * m);
        // tᵀ = w_bᵀ e_bᵀ, over k blocks of the block's columns.
        const int64_t kc_len = kc_of(len);
        for (int64_t pc = 0; pc < len; pc += kc_len) {
          const int64_t kc = std::min(kc_len, len - pc);
          sgemm_detail::pack_b(false, lb, m, pc, 0, kc, m, bp);
          gemm_block(false, dim, m, kc, nc, w_panel(true, pc, kc), w_lda, bp, tt, m,
                     pc == 0 ? 0.0f : 1.0f);
        }
        // Pᵀ column i = keep_i Pᵀ + add_i tᵀ, rescaled to the running max R_i.
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
        for (int64_t d = 0; d < dim; ++d) {
          float* pr = pp + d * m;
          const float* tr = tt + d * m;
          int64_t i = 0;
          for (; i + W <= m; i += W) {
            simd::store(pr + i, simd::load(pr + i) * simd::load(keep + i) +
                                    simd::load(tr + i) * simd::load(add + i));
          }
          for (; i < m; ++i) pr[i] = keep[i] * pr[i] + add[i] * tr[i];
        }
      }
#pragma omp barrier
#pragma omp for schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        const int64_t y = yc[i];
        float* dxi = dx + (r0 + i) * dim;
        if (y == ignore) {
          std::fill(dxi, dxi + dim, 0.0f);
          for (int64_t b = 0; b < blocks; ++b) blk_s[b * m + i] = 0.0f;
          continue;
        }
        float big = kNegInf;
        for (int64_t b = 0; b < blocks; ++b) big = std::max(big, blk_m[b * m + i]);
        float total = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          total += blk_s[b * m + i] * std::exp(blk_m[b * m + i] - big);
        }
        row_loss[r0 + i] += big + std::log(total);
        // From here blk_s holds each block's row scale: g exp(m_b - M) / S.
        for (int64_t b = 0; b < blocks; ++b) {
          blk_s[b * m + i] = g * std::exp(blk_m[b * m + i] - big) / total;
        }
        // dx_i = sum_u exp(R_u - M) g / S P_u - g w_y; threads without blocks hold R = -inf.
        std::fill(dxi, dxi + dim, 0.0f);
        for (int u = 0; u < team; ++u) {
          const float ru = (mine(u) + tl.r)[i];
          if (ru == kNegInf) continue;
          const float f = g * std::exp(ru - big) / total;
          const float* pu = mine(u) + tl.p + i;
          for (int64_t j = 0; j < dim; ++j) dxi[j] += f * pu[j * m];
        }
        const float* wy = w + y * dim;
        for (int64_t j = 0; j < dim; ++j) dxi[j] -= g * wy[j];
      }
      // dw_b (+)= (e_b ⊙ c_b)ᵀ x[chunk], then dw_y -= g x_i for the block's labels, in row order.
      for (int64_t b = range.first; b < range.last; ++b) {
        const int64_t j0 = b * vb, len = std::min(vb, vocab - j0);
        const float* lb = logits + j0 * m;
        const float* cb = blk_s + b * m;
        float* dwb = dw + j0 * dim;
        for (int64_t pc = 0; pc < m; pc += kc_rows) {
          const int64_t kc = std::min(kc_rows, m - pc);
          gemm_block(
              true, len, dim, kc, nc,
              [&](int64_t ir, int mr) {
                sgemm_detail::pack_a_rows_scaled(lb, m, ir, pc, mr, kc, cb + pc, ap);
                return static_cast<const float*>(ap);
              },
              0, xb + pc * dpad, dwb, dim, r0 == 0 && pc == 0 ? 0.0f : 1.0f);
        }
        for (int64_t i = 0; i < m; ++i) {
          const int64_t y = yc[i];
          if (y == ignore || y < j0 || y >= j0 + len) continue;
          const float* xi = xc + i * dim;
          float* dwy = dwb + (y - j0) * dim;
          for (int64_t j = 0; j < dim; ++j) dwy[j] -= g * xi[j];
        }
      }
    }
  }
}

}  // namespace lj::cpu
