// The AVX-512 pieces of the in-tree f32 GEMM (sgemm_avx512.h): packing and the register-blocked
// microkernel. Compiled for AVX-512F whatever the build's -march (a target pragma in the .cc), so
// they must only run where sgemm_avx512_available() is true.
//
// Packed layouts (every micro-panel contiguous; a_panel_floats(ta, kc) apart):
//   A, ta = false (row-major source): panels of kMr rows, row-major with a fixed row stride:
//      op(a)(p*kMr + i, k) at [i * kAStride + k] (kc <= kKcMax). A copy, no transpose.
//   A, ta = true: panels of kMr rows, k-major: op(a)(p*kMr + i, k) at [k * kMr + i] (a short
//      last panel's missing rows are 0).
//   B: panels of kNr columns; panel q holds, for k = 0..kc-1, op(b)(k, q*kNr + j) at
//      [k * kNr + j], columns past n zero.
#pragma once

#include <cstdint>

namespace lj::cpu::sgemm_detail {

inline constexpr int kMr = 14;          // rows of the microkernel's C tile
inline constexpr int kNr = 32;          // columns: two 16-float vectors
inline constexpr int64_t kKcMax = 384;  // the largest k block
// Row stride of a row-major A panel: kKcMax + 16, an odd number of 64-byte lines, so the kMr rows
// fall in different L1 sets.
inline constexpr int64_t kAStride = kKcMax + 16;

// Floats between consecutive packed A panels.
inline int64_t a_panel_floats(bool ta, int64_t kc) {
  return ta ? kc * kMr : kMr * kAStride;
}

// Packs the mc x kc block of op(a) at (row i0, column p0): ta = false reads a[i * lda + p]
// (rows), ta = true reads a[p * lda + i] (transposed while packing). `dst` holds
// ceil(mc / kMr) * a_panel_floats(ta, kc) floats.
void pack_a(bool ta, const float* a, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
            float* dst);
// The same from bf16 a, each value widened to f32 exactly as it is packed.
void pack_a(bool ta, const uint16_t* a, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
            float* dst);
// pack_a(false, ...) with column k of the block multiplied by scale[k] (k < kc) as it is copied.
void pack_a_rows_scaled(const float* a, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
                        const float* scale, float* dst);
// Packs the kc x nc block of op(b) at (row p0, column j0): tb = false reads b[p * ldb + j],
// tb = true reads b[j * ldb + p] (transposed while packing). `dst` holds ceil(nc / kNr) * kc * kNr.
void pack_b(bool tb, const float* b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
            float* dst);
// The same from bf16 b, widened to f32 as it is packed.
void pack_b(bool tb, const uint16_t* b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
            float* dst);

// c (mr x nr, row stride ldc) = alpha * (a_panel x b_panel) + beta * c over kc, the sum over k
// accumulated in order 0..kc-1 from zero; beta == 0 never reads c. mr <= kMr, nr <= kNr.
// a_rows: the A panel is row-major (ta = false), else k-major.
void micro_tile(bool a_rows, int mr, int nr, int64_t kc, const float* a_panel, const float* b_panel,
                float* c, int64_t ldc, float alpha, float beta);
// micro_tile with A read where it lies, unpacked: a_rows, row i of the tile at a + i * lda (k
// contiguous); else k step p at a + p * lda (the tile's mr rows contiguous).
void micro_tile_strided(bool a_rows, int mr, int nr, int64_t kc, const float* a, int64_t lda,
                        const float* b_panel, float* c, int64_t ldc, float alpha, float beta);

}  // namespace lj::cpu::sgemm_detail
