// Flash attention (FlashAttention-2's scheme), the bodies of one thread block, written for any
// executor X (flash_tiles.h): attention.cu runs them as CUDA kernels, the host emulation test
// runs the same code with one OS thread per CUDA thread.
//
//   forward (grid: query tiles x H x B): a block owns 64 queries of one head, 16 per warp; it
//     walks the key tiles (64 keys) in order: S = Q Kᵀ (mma), scaled and masked, online softmax
//     (running max m and sum l per row, earlier partial output rescaled by exp(m_old - m_new)),
//     P rounded to E (bf16: in registers, the mma's C layout reused as its A layout; f32: through
//     shared memory), O += P V. Causal: key tiles past the block's
//     last query are never loaded; the diagonal tile is masked per element. Writes O = O / l and
//     lse = m + log l (natural log, f32).
//   di (grid: rows / 64): Di = rowsum(dO ∘ O) in f32, one warp per row.
//   dq (grid: query tiles x H x B): S and dP = dO Vᵀ per key tile as in the forward,
//     P = exp(scale S - lse), dS = scale P ∘ (dP - Di), dQ += dS K.
//   dkv (grid: key tiles x G x B): a block owns 64 keys of one kv head, 16 per warp, and walks
//     every query tile of every q head of its group (h = g·H/G ..): Sᵀ = K Qᵀ, dPᵀ = V dOᵀ,
//     Pᵀ, dSᵀ as above, dV += Pᵀ dO, dK += dSᵀ Q. Causal: query tiles before the block's first
//     key are skipped.
// No atomics: every output element is summed by one thread in a fixed order, so results are
// bitwise reproducible run to run (as the CPU backend's). The price is that dq recomputes S and
// dP beside dkv (7 tile GEMMs per tile pair instead of FlashAttention-2's 5 with atomic dQ).
//
// Exponentials are base 2 with log2(e) folded into the scale (one FFMA and one EX2 per score).
// Rows past T (tile padding) compute on zero rows and are never written; padded head-dim columns
// (d < D) are zero in every tile, so they add nothing.
#pragma once

#include "backends/cuda/flash_tiles.h"

namespace lj::cuda::flash {

inline constexpr int kKeyTile = 64;  // keys per step of forward and dq
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// Queries per step of dkv: 64, or 32 from D = 64 (its accumulators dK and dV take 2 x D / 2
// registers per thread; 32-query steps keep Sᵀ and dPᵀ at 16 each: at D = 64 that is 160
// registers and 3 blocks per SM instead of 178 and 2, and D = 128 does not spill).
template <int D>
inline constexpr int kDkvQueryTile = D >= 64 ? 32 : 64;

template <class E>
struct Params {
  const E *q, *k, *v, *out, *dout;  // q, out, dout (B, H, Tq, d); k, v (B, G, Tk, d)
  const float* lse;                 // (B, H, Tq), backward input
  const float* di;                  // (B, H, Tq), dq and dkv input
  E *o, *dq, *dk, *dv;              // outputs
  float *lse_out, *di_out;
  int h, g, tq, tk, d;
  int causal;
  int vec16;         // rows are whole 16-byte chunks (d == D and 16-byte aligned pointers)
  float scale;       // softmax scale
  float scale_log2;  // scale * log2(e)
};

// Shared memory of a tile of `rows` rows of width D.
template <class E, int D>
inline constexpr int kLd = D + kPad<E>;
template <class E, int D>
inline constexpr int tile_bytes(int rows) {
  return rows * kLd<E, D> * static_cast<int>(sizeof(E));
}
// The warps' 16 x cols scratch (P or dS) of the f32 kernels; bf16 keeps P and dS in registers
// (warp_gemm_c).
template <class E>
inline constexpr bool kRegP = sizeof(E) == 2;
template <class E>
inline constexpr int kScratchRows = kRegP<E> ? 0 : kWarps* kWarpRows;
template <class E>
inline constexpr int scratch_bytes(int cols) {
  return kScratchRows<E> * (cols + kPad<E>)*static_cast<int>(sizeof(E));
}

template <class E, int D>
inline constexpr int forward_smem_bytes() {
  return 3 * tile_bytes<E, D>(kBlockRows) + scratch_bytes<E>(kKeyTile);
}
template <class E, int D>
inline constexpr int dq_smem_bytes() {
  return 4 * tile_bytes<E, D>(kBlockRows) + scratch_bytes<E>(kKeyTile) + 2 * kBlockRows * 4;
}
template <class E, int D>
inline constexpr int dkv_smem_bytes() {
  constexpr int br = kDkvQueryTile<D>;
  return 2 * tile_bytes<E, D>(kBlockRows) + 2 * tile_bytes<E, D>(br) + 2 * scratch_bytes<E>(br) +
         2 * br * 4;
}

// Element e (0..3) of C tile nt: its row within the warp's 16 and its column within the tile.
LJ_FA_FN int c_row(int lane, int e) {
  return (lane >> 2) + (e >= 2 ? 8 : 0);
}
LJ_FA_FN int c_col(int lane, int nt, int e) {
  return nt * 8 + 2 * (lane & 3) + (e & 1);
}

// ---- forward ---------------------------------------------------------------------------------

template <class E, int D, class X>
LJ_FA_FN void forward_block(X& x, const Params<E>& p, int qtile, int h, int b) {
  constexpr int ld = kLd<E, D>, pld = kKeyTile + kPad<E>;
  constexpr int kNt = kKeyTile / 8, kDt = D / 8;
  E* qs = reinterpret_cast<E*>(x.smem());
  E* ks = qs + kBlockRows * ld;
  E* vs = ks + kBlockRows * ld;
  const int warp = x.tid() >> 5, lane = x.tid() & 31;
  E* ps = vs + kBlockRows * ld + warp * kWarpRows * pld;
  const int g = h / (p.h / p.g);
  const int i0 = qtile * kBlockRows;
  const int64_t qhead = (static_cast<int64_t>(b) * p.h + h) * p.tq;
  const int64_t khead = (static_cast<int64_t>(b) * p.g + g) * p.tk;
  load_tile<E, D>(x, qs, ld, p.q + (qhead + i0) * p.d, kBlockRows, p.tq - i0, p.d, p.vec16);
  float o[kDt][4];
  zero(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8 (l: partial)
  const int row0 = i0 + warp * kWarpRows;
  const int key_end = p.causal ? (i0 + kBlockRows < p.tk ? i0 + kBlockRows : p.tk) : p.tk;
  for (int j0 = 0; j0 < key_end; j0 += kKeyTile) {
    x.sync();  // every warp is done with the previous K and V tiles
    load_tile<E, D>(x, ks, ld, p.k + (khead + j0) * p.d, kKeyTile, p.tk - j0, p.d, p.vec16);
    load_tile<E, D>(x, vs, ld, p.v + (khead + j0) * p.d, kKeyTile, p.tk - j0, p.d, p.vec16);
    x.sync();
    float s[kNt][4];
    zero(s);
    warp_gemm<kNt, D, false>(x, s, qs + warp * kWarpRows * ld, ld, ks, ld);
    const bool masked = j0 + kKeyTile > p.tk || (p.causal && j0 + kKeyTile - 1 > row0);
    float mx[2] = {-INFINITY, -INFINITY};
    LJ_FA_UNROLL
    for (int nt = 0; nt < kNt; ++nt) {
      LJ_FA_UNROLL
      for (int e = 0; e < 4; ++e) {
        float v = s[nt][e] * p.scale_log2;
        if (masked) {
          const int col = j0 + c_col(lane, nt, e), row = row0 + c_row(lane, e);
          if (col >= p.tk || (p.causal && col > row)) v = -INFINITY;
        }
        s[nt][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
    }
    float alpha[2], m_use[2];
    LJ_FA_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m[r], quad_max(x, mx[r]));
      // A row with nothing visible yet keeps max -inf; subtract 0 then (exp2 gives 0, not NaN).
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;
      alpha[r] = exp2f(m[r] - m_use[r]);  // 0 while m was -inf
      m[r] = m_new;
      l[r] *= alpha[r];
    }
    LJ_FA_UNROLL
    for (int nt = 0; nt < kNt; ++nt) {
      LJ_FA_UNROLL
      for (int e = 0; e < 4; ++e) {
        const float pe = exp2f(s[nt][e] - m_use[e >> 1]);
        s[nt][e] = pe;
        l[e >> 1] += pe;
      }
    }
    LJ_FA_UNROLL
    for (int dt = 0; dt < kDt; ++dt) {
      LJ_FA_UNROLL
      for (int e = 0; e < 4; ++e) o[dt][e] *= alpha[e >> 1];
    }
    if constexpr (kRegP<E>) {
      warp_gemm_c(x, o, s, vs, ld);
    } else {
      store_tile<E>(x, s, ps, pld);
      x.sync_warp();
      warp_gemm<kDt, kKeyTile, true>(x, o, ps, pld, vs, ld);
      x.sync_warp();  // P is read before the next tile overwrites it
    }
  }
  float inv[2], lse[2];
  LJ_FA_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(x, l[r]);
    inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
    lse[r] = sum > 0.0f ? (m[r] + log2f(sum)) * kLn2 : -INFINITY;
  }
  LJ_FA_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + (lane >> 2) + 8 * r;
    if (row >= p.tq) continue;
    E* orow = p.o + (qhead + row) * p.d;
    LJ_FA_UNROLL
    for (int dt = 0; dt < kDt; ++dt) {
      LJ_FA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int col = c_col(lane, dt, e);
        if (col < p.d) orow[col] = from_f32<E>(o[dt][2 * r + e] * inv[r]);
      }
    }
    if ((lane & 3) == 0) p.lse_out[qhead + row] = lse[r];
  }
}

// ---- backward --------------------------------------------------------------------------------

// Di of rows [64 blk, 64 blk + 64) of the (B H Tq) rows: warp w takes rows w, w + 4, ...
template <class E, class X>
LJ_FA_FN void di_block(X& x, const Params<E>& p, int blk, int64_t rows) {
  const int warp = x.tid() >> 5, lane = x.tid() & 31;
  for (int rr = warp; rr < kBlockRows; rr += kWarps) {
    const int64_t row = static_cast<int64_t>(blk) * kBlockRows + rr;
    if (row >= rows) break;  // uniform across the warp
    float s = 0.0f;
    for (int c = lane; c < p.d; c += 32)
      s = fmaf(to_f32(p.dout[row * p.d + c]), to_f32(p.out[row * p.d + c]), s);
    LJ_FA_UNROLL
    for (int o = 16; o > 0; o >>= 1) s += x.shfl_xor(s, o);
    if (lane == 0) p.di_out[row] = s;
  }
}

template <class E, int D, class X>
LJ_FA_FN void dq_block(X& x, const Params<E>& p, int qtile, int h, int b) {
  constexpr int ld = kLd<E, D>, pld = kKeyTile + kPad<E>;
  constexpr int kNt = kKeyTile / 8, kDt = D / 8;
  E* qs = reinterpret_cast<E*>(x.smem());
  E* dos = qs + kBlockRows * ld;
  E* ks = dos + kBlockRows * ld;
  E* vs = ks + kBlockRows * ld;
  const int warp = x.tid() >> 5, lane = x.tid() & 31;
  E* dss = vs + kBlockRows * ld;
  float* lse2s = reinterpret_cast<float*>(dss + kScratchRows<E> * pld);
  float* dis = lse2s + kBlockRows;
  dss += warp * kWarpRows * pld;
  const int g = h / (p.h / p.g);
  const int i0 = qtile * kBlockRows;
  const int64_t qhead = (static_cast<int64_t>(b) * p.h + h) * p.tq;
  const int64_t khead = (static_cast<int64_t>(b) * p.g + g) * p.tk;
  load_tile<E, D>(x, qs, ld, p.q + (qhead + i0) * p.d, kBlockRows, p.tq - i0, p.d, p.vec16);
  load_tile<E, D>(x, dos, ld, p.dout + (qhead + i0) * p.d, kBlockRows, p.tq - i0, p.d, p.vec16);
  for (int r = x.tid(); r < kBlockRows; r += kThreads) {
    const bool in = i0 + r < p.tq;
    lse2s[r] = in ? p.lse[qhead + i0 + r] * kLog2e : 0.0f;
    dis[r] = in ? p.di[qhead + i0 + r] : 0.0f;
  }
  float dq[kDt][4];
  zero(dq);
  const int row0 = i0 + warp * kWarpRows;
  const int key_end = p.causal ? (i0 + kBlockRows < p.tk ? i0 + kBlockRows : p.tk) : p.tk;
  for (int j0 = 0; j0 < key_end; j0 += kKeyTile) {
    x.sync();
    load_tile<E, D>(x, ks, ld, p.k + (khead + j0) * p.d, kKeyTile, p.tk - j0, p.d, p.vec16);
    load_tile<E, D>(x, vs, ld, p.v + (khead + j0) * p.d, kKeyTile, p.tk - j0, p.d, p.vec16);
    x.sync();
    float s[kNt][4], dp[kNt][4];
    zero(s);
    zero(dp);
    warp_gemm<kNt, D, false>(x, s, qs + warp * kWarpRows * ld, ld, ks, ld);
    warp_gemm<kNt, D, false>(x, dp, dos + warp * kWarpRows * ld, ld, vs, ld);
    const bool masked = j0 + kKeyTile > p.tk || (p.causal && j0 + kKeyTile - 1 > row0);
    LJ_FA_UNROLL
    for (int nt = 0; nt < kNt; ++nt) {
      LJ_FA_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int r = warp * kWarpRows + c_row(lane, e);
        float pe = exp2f(fmaf(s[nt][e], p.scale_log2, -lse2s[r]));
        if (masked) {
          const int col = j0 + c_col(lane, nt, e);
          if (col >= p.tk || (p.causal && col > i0 + r)) pe = 0.0f;
        }
        s[nt][e] = p.scale * pe * (dp[nt][e] - dis[r]);  // dS
      }
    }
    if constexpr (kRegP<E>) {
      warp_gemm_c(x, dq, s, ks, ld);
    } else {
      store_tile<E>(x, s, dss, pld);
      x.sync_warp();
      warp_gemm<kDt, kKeyTile, true>(x, dq, dss, pld, ks, ld);
      x.sync_warp();
    }
  }
  LJ_FA_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + (lane >> 2) + 8 * r;
    if (row >= p.tq) continue;
    E* drow = p.dq + (qhead + row) * p.d;
    LJ_FA_UNROLL
    for (int dt = 0; dt < kDt; ++dt) {
      LJ_FA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int col = c_col(lane, dt, e);
        if (col < p.d) drow[col] = from_f32<E>(dq[dt][2 * r + e]);
      }
    }
  }
}

template <class E, int D, class X>
LJ_FA_FN void dkv_block(X& x, const Params<E>& p, int ktile, int g, int b) {
  constexpr int ld = kLd<E, D>, br = kDkvQueryTile<D>, pld = br + kPad<E>;
  constexpr int kNt = br / 8, kDt = D / 8;
  E* ks = reinterpret_cast<E*>(x.smem());
  E* vs = ks + kBlockRows * ld;
  E* qs = vs + kBlockRows * ld;
  E* dos = qs + br * ld;
  const int warp = x.tid() >> 5, lane = x.tid() & 31;
  E* pts = dos + br * ld;
  E* dsts = pts + kScratchRows<E> * pld;
  float* lse2s = reinterpret_cast<float*>(dsts + kScratchRows<E> * pld);
  float* dis = lse2s + br;
  pts += warp * kWarpRows * pld;
  dsts += warp * kWarpRows * pld;
  const int group = p.h / p.g;
  const int j0 = ktile * kBlockRows;
  const int64_t khead = (static_cast<int64_t>(b) * p.g + g) * p.tk;
  load_tile<E, D>(x, ks, ld, p.k + (khead + j0) * p.d, kBlockRows, p.tk - j0, p.d, p.vec16);
  load_tile<E, D>(x, vs, ld, p.v + (khead + j0) * p.d, kBlockRows, p.tk - j0, p.d, p.vec16);
  float dk[kDt][4], dv[kDt][4];
  zero(dk);
  zero(dv);
  const int key0 = j0 + warp * kWarpRows;  // the warp's first key
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const int64_t qhead = (static_cast<int64_t>(b) * p.h + h) * p.tq;
    // Causal: queries before j0 see none of these keys (j0 is a multiple of br).
    for (int i0 = p.causal ? j0 : 0; i0 < p.tq; i0 += br) {
      x.sync();
      load_tile<E, D>(x, qs, ld, p.q + (qhead + i0) * p.d, br, p.tq - i0, p.d, p.vec16);
      load_tile<E, D>(x, dos, ld, p.dout + (qhead + i0) * p.d, br, p.tq - i0, p.d, p.vec16);
      for (int r = x.tid(); r < br; r += kThreads) {
        const bool in = i0 + r < p.tq;
        lse2s[r] = in ? p.lse[qhead + i0 + r] * kLog2e : 0.0f;
        dis[r] = in ? p.di[qhead + i0 + r] : 0.0f;
      }
      x.sync();
      float st[kNt][4], dpt[kNt][4];  // Sᵀ, dPᵀ: the warp's 16 keys x br queries
      zero(st);
      zero(dpt);
      warp_gemm<kNt, D, false>(x, st, ks + warp * kWarpRows * ld, ld, qs, ld);
      warp_gemm<kNt, D, false>(x, dpt, vs + warp * kWarpRows * ld, ld, dos, ld);
      const bool masked = i0 + br > p.tq || key0 + kWarpRows > p.tk || (p.causal && i0 < key0 + 15);
      LJ_FA_UNROLL
      for (int nt = 0; nt < kNt; ++nt) {
        LJ_FA_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int c = c_col(lane, nt, e);  // query i0 + c
          float pe = exp2f(fmaf(st[nt][e], p.scale_log2, -lse2s[c]));
          if (masked) {
            const int key = key0 + c_row(lane, e), q = i0 + c;
            if (q >= p.tq || key >= p.tk || (p.causal && q < key)) pe = 0.0f;
          }
          st[nt][e] = pe;
          dpt[nt][e] = p.scale * pe * (dpt[nt][e] - dis[c]);  // dSᵀ
        }
      }
      if constexpr (kRegP<E>) {
        warp_gemm_c(x, dv, st, dos, ld);
        warp_gemm_c(x, dk, dpt, qs, ld);
      } else {
        store_tile<E>(x, st, pts, pld);
        store_tile<E>(x, dpt, dsts, pld);
        x.sync_warp();
        warp_gemm<kDt, br, true>(x, dv, pts, pld, dos, ld);
        warp_gemm<kDt, br, true>(x, dk, dsts, pld, qs, ld);
        x.sync_warp();
      }
    }
  }
  LJ_FA_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + (lane >> 2) + 8 * r;
    if (key >= p.tk) continue;
    E* dkrow = p.dk + (khead + key) * p.d;
    E* dvrow = p.dv + (khead + key) * p.d;
    LJ_FA_UNROLL
    for (int dt = 0; dt < kDt; ++dt) {
      LJ_FA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int col = c_col(lane, dt, e);
        if (col < p.d) {
          dkrow[col] = from_f32<E>(dk[dt][2 * r + e]);
          dvrow[col] = from_f32<E>(dv[dt][2 * r + e]);
        }
      }
    }
  }
}

}  // namespace lj::cuda::flash
