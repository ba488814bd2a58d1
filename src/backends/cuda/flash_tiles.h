// The warp-level pieces of the flash-attention kernels (flash_attention.h), written once for the
// device and for the host emulation that tests them without a GPU (tests/cuda/flash_emulation_*):
// nvcc compiles them as __device__ functions, a host compiler as plain inline functions.
//
// Everything a thread does that involves other threads goes through an executor `X`:
//   int tid()                     thread index in the block (kThreads threads, kWarps warps)
//   char* smem()                  the block's shared memory
//   void sync()                   __syncthreads()
//   void sync_warp()              __syncwarp()
//   float shfl_xor(float, int)    __shfl_xor_sync over the whole warp
//   void mma(float c[4], const uint32_t a[4], const uint32_t b[2])
//                                 mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, c += a b
//   void ldsm_x4(uint32_t r[4], const uint16_t* row)        ldmatrix.sync.aligned.m8n8.x4.b16
//   void ldsm_x4_trans(uint32_t r[4], const uint16_t* row)  the same with .trans
//   void copy16(void* dst, const void* src)   one 16-byte load and store
// The device executor is attention.cu's; the host one runs each thread of a block as an OS
// thread with barriers for sync/sync_warp and emulates shfl_xor, ldmatrix and mma through the
// warp's exchanged registers and addresses, so the fragment layouts below are exercised as on
// the device.
//
// Element types: `float` (f32 storage) and `uint16_t` (the bits of a bf16). Math is f32; a bf16
// store rounds to nearest even (as __float2bfloat16_rn).
//
// The mma fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16", .bf16): lane L has
// g = L / 4 and t = L % 4;
//   A (16 x 16, row-major): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1],
//                           a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8, "col"):      b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
//   C (16 x 8, f32):        c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][2t, 2t+1]
// each 32-bit register holding its lower-index element in its low half.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#define LJ_FA_FN __device__ __forceinline__
#define LJ_FA_UNROLL _Pragma("unroll")
#else
#define LJ_FA_FN inline
#define LJ_FA_UNROLL
#endif

namespace lj::cuda::flash {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kWarpRows = 16;                   // rows of one warp's tiles (the mma's M)
inline constexpr int kBlockRows = kWarps * kWarpRows;  // 64 rows per block tile

// ---- scalars ---------------------------------------------------------------------------------

LJ_FA_FN uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

LJ_FA_FN float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

LJ_FA_FN float to_f32(float x) {
  return x;
}
LJ_FA_FN float to_f32(uint16_t b) {
  return float_of(static_cast<uint32_t>(b) << 16);
}

// f32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN), as __float2bfloat16_rn.
LJ_FA_FN uint16_t bf16_bits(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

template <class E>
LJ_FA_FN E from_f32(float x);
template <>
LJ_FA_FN float from_f32<float>(float x) {
  return x;
}
template <>
LJ_FA_FN uint16_t from_f32<uint16_t>(float x) {
  return bf16_bits(x);
}

// Two bf16 as one register, `lo` in the low half.
LJ_FA_FN uint32_t pack_pair(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Two f32 as two bf16 (round to nearest even) in one register, `lo` in the low half.
LJ_FA_FN uint32_t pack_bf16(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
#else
  return pack_pair(bf16_bits(lo), bf16_bits(hi));
#endif
}

// Padding of shared-memory rows, in elements (16 bytes): row r of a tile starts 4 banks after
// row r - 1, so the fragment loads of a warp hit 32 different banks.
template <class E>
inline constexpr int kPad = 16 / static_cast<int>(sizeof(E));

// ---- warp GEMM -------------------------------------------------------------------------------

// acc[nt] (the warp's 16 x 8 C tile nt, C layout) += A (16 x K) B (K x 8 NT), where
//   A(r, k) = a[r * lda + k]                                  (row-major, shared memory)
//   B(k, n) = b[n * ldb + k]  (kKMajor false: B is stored transposed, e.g. Kᵀ from K rows)
//   B(k, n) = b[k * ldb + n]  (kKMajor true: e.g. V rows as keys x D)
// bf16: one mma per (16-wide k step, n tile), f32 accumulation. f32: the same C elements by
// FMA in increasing k (no tensor cores: the f32 path keeps f32 accuracy).
// bf16: the fragments come from ldmatrix.x4 (four 8 x 8 matrices per instruction; lane L
// gives the address of row L % 8 of matrix L / 8, and receives in register j row L / 4, columns
// 2 (L % 4) and 2 (L % 4) + 1 of matrix j, transposed with .trans). A: matrices (rows 0-7,
// k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) are a[0..3]. B, two n
// tiles per load: (tile nt, k 0-7), (nt, k 8-15), (nt + 1, k 0-7), (nt + 1, k 8-15) are b[0],
// b[1] of tile nt and of tile nt + 1; k-major B is read with .trans. Every row address is
// 16-byte aligned: rows of whole 8-element blocks at a 16-byte-aligned leading dimension.
template <int NT, int K, bool kKMajor, class X>
LJ_FA_FN void warp_gemm(X& x, float (&acc)[NT][4], const uint16_t* a, int lda, const uint16_t* b,
                        int ldb) {
  static_assert(K % 16 == 0, "K is a multiple of the mma's 16");
  static_assert(NT % 2 == 0, "B fragments load two n tiles at a time");
  const int lane = x.tid() & 31, m = lane >> 3, r = lane & 7;
  const uint16_t* a_row = a + ((m & 1) * 8 + r) * lda + (m >> 1) * 8;
  const uint16_t* b_row = kKMajor ? b + ((m & 1) * 8 + r) * ldb + (m >> 1) * 8
                                  : b + ((m >> 1) * 8 + r) * ldb + (m & 1) * 8;
  LJ_FA_UNROLL
  for (int ks = 0; ks < K / 16; ++ks) {
    uint32_t af[4];
    x.ldsm_x4(af, a_row + ks * 16);
    LJ_FA_UNROLL
    for (int nt = 0; nt < NT; nt += 2) {
      uint32_t bf[4];
      if constexpr (kKMajor) {
        x.ldsm_x4_trans(bf, b_row + ks * 16 * ldb + nt * 8);
      } else {
        x.ldsm_x4(bf, b_row + nt * 8 * ldb + ks * 16);
      }
      const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
      x.mma(acc[nt], af, b0);
      x.mma(acc[nt + 1], af, b1);
    }
  }
}

// acc (16 x 8 NT) += A (16 x 8 NTA) B, bf16, where A is the warp's own C tiles `ac` (P or dS),
// rounded to bf16 in registers: the C layout of n tiles 2kk and 2kk + 1 is the A layout of k
// step kk (a[0] = tile 2kk's c[0..1], a[1] its c[2..3], a[2], a[3] the same of tile 2kk + 1), so
// no shared memory and no warp barrier are needed (FlashAttention-2's register reuse). B is
// k-major in shared memory (B(k, n) = b[k * ldb + n]), read by ldmatrix.x4.trans.
template <int NT, int NTA, class X>
LJ_FA_FN void warp_gemm_c(X& x, float (&acc)[NT][4], const float (&ac)[NTA][4], const uint16_t* b,
                          int ldb) {
  static_assert(NTA % 2 == 0 && NT % 2 == 0, "whole k steps, two n tiles per load");
  const int lane = x.tid() & 31, m = lane >> 3, r = lane & 7;
  const uint16_t* b_row = b + ((m & 1) * 8 + r) * ldb + (m >> 1) * 8;
  LJ_FA_UNROLL
  for (int kk = 0; kk < NTA / 2; ++kk) {
    const uint32_t af[4] = {pack_bf16(ac[2 * kk][0], ac[2 * kk][1]),
                            pack_bf16(ac[2 * kk][2], ac[2 * kk][3]),
                            pack_bf16(ac[2 * kk + 1][0], ac[2 * kk + 1][1]),
                            pack_bf16(ac[2 * kk + 1][2], ac[2 * kk + 1][3])};
    LJ_FA_UNROLL
    for (int nt = 0; nt < NT; nt += 2) {
      uint32_t bf[4];
      x.ldsm_x4_trans(bf, b_row + kk * 16 * ldb + nt * 8);
      const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
      x.mma(acc[nt], af, b0);
      x.mma(acc[nt + 1], af, b1);
    }
  }
}

template <int NT, int K, bool kKMajor, class X>
LJ_FA_FN void warp_gemm(X& x, float (&acc)[NT][4], const float* a, int lda, const float* b,
                        int ldb) {
  const int lane = x.tid() & 31, g = lane >> 2, t = lane & 3;
  const float* a0 = a + g * lda;
  const float* a1 = a + (g + 8) * lda;
#if defined(__CUDACC__)
#pragma unroll 4
#endif
  for (int k = 0; k < K; ++k) {
    const float x0 = a0[k], x1 = a1[k];
    LJ_FA_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      const int n = nt * 8 + 2 * t;
      const float b0 = kKMajor ? b[k * ldb + n] : b[n * ldb + k];
      const float b1 = kKMajor ? b[k * ldb + n + 1] : b[(n + 1) * ldb + k];
      acc[nt][0] = fmaf(x0, b0, acc[nt][0]);
      acc[nt][1] = fmaf(x0, b1, acc[nt][1]);
      acc[nt][2] = fmaf(x1, b0, acc[nt][2]);
      acc[nt][3] = fmaf(x1, b1, acc[nt][3]);
    }
  }
}

template <int NT>
LJ_FA_FN void zero(float (&acc)[NT][4]) {
  LJ_FA_UNROLL
  for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
}

// Sum / max over the 4 lanes of a quad (they hold one row's columns in the C layout).
template <class X>
LJ_FA_FN float quad_sum(X& x, float v) {
  v += x.shfl_xor(v, 1);
  return v + x.shfl_xor(v, 2);
}
template <class X>
LJ_FA_FN float quad_max(X& x, float v) {
  v = fmaxf(v, x.shfl_xor(v, 1));
  return fmaxf(v, x.shfl_xor(v, 2));
}

// The warp's C tiles (16 x 8 NT) into shared memory as E: element (r, c) at s[r * ld + c].
template <class E, int NT, class X>
LJ_FA_FN void store_tile(X& x, const float (&acc)[NT][4], E* s, int ld) {
  const int lane = x.tid() & 31, g = lane >> 2, t = lane & 3;
  LJ_FA_UNROLL
  for (int nt = 0; nt < NT; ++nt) {
    E* p = s + g * ld + nt * 8 + 2 * t;
    p[0] = from_f32<E>(acc[nt][0]);
    p[1] = from_f32<E>(acc[nt][1]);
    p[8 * ld] = from_f32<E>(acc[nt][2]);
    p[8 * ld + 1] = from_f32<E>(acc[nt][3]);
  }
}

// ---- tiles from global memory ----------------------------------------------------------------

// dst (rows x D, leading dim ld, shared) = src rows (row-major, d columns each); rows at or past
// `valid` and columns d..D are zero. All threads of the block take part. vec16: d == D and the
// rows are 16-byte aligned, so whole 16-byte chunks are copied.
template <class E, int D, class X>
LJ_FA_FN void load_tile(X& x, E* dst, int ld, const E* src, int rows, int valid, int d,
                        bool vec16) {
  if (vec16) {
    constexpr int kChunk = 16 / static_cast<int>(sizeof(E));
    constexpr int kPerRow = D / kChunk;
    for (int i = x.tid(); i < rows * kPerRow; i += kThreads) {
      const int r = i / kPerRow, c = (i % kPerRow) * kChunk;
      if (r < valid) {
        x.copy16(dst + r * ld + c, src + static_cast<int64_t>(r) * D + c);
      } else {
        LJ_FA_UNROLL
        for (int e = 0; e < kChunk; ++e) dst[r * ld + c + e] = E(0);
      }
    }
    return;
  }
  for (int i = x.tid(); i < rows * D; i += kThreads) {
    const int r = i / D, c = i % D;
    dst[r * ld + c] = r < valid && c < d ? src[static_cast<int64_t>(r) * d + c] : E(0);
  }
}

}  // namespace lj::cuda::flash
