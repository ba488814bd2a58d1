// What the CPU attention kernels (attention.cc) share with their bf16 dot-product tile products
// (attention_bf16_dot.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lj::cpu::attn {

// What a product over a diagonal tile (its queries and keys start at the same index, so half
// of it is hidden by the causal mask) may skip, at micro-block granularity.
enum class Tri : uint8_t {
  none,
  out_upper,   // c(r, col) is not needed for col > r (S, dP: queries x keys)
  out_lower,   // c(r, col) is not needed for col < r (Sᵀ: keys x queries)
  k_upto_row,  // a(r, kk) is zero for kk > r (P V, dS K)
  k_from_row,  // a(r, kk) is zero for kk < r (Pᵀ dO, dSᵀ Q)
};

// Rows of the tile products' micro-kernels, and how many one call takes of the rows [i, m): 6
// while at least 12 remain, then the rest in at most two near-equal blocks, so a 32-row tile runs
// 6+6+6+6+4+4 rather than ending on a load-bound 2-row block.
inline constexpr int kMr = 6;
inline int block_rows(int remaining) {
  if (remaining >= 2 * kMr || remaining <= kMr) return remaining < kMr ? remaining : kMr;
  return (remaining + 1) / 2;
}

// Whether the attention uses tile_gemm_bf16_dot: this CPU has AVX512_BF16 and AVX512BW, and
// set_bf16_dot_enabled has not turned it off.
bool bf16_dot_available();
// On by default; off, bf16 attention multiplies its bf16-rounded operands with the f32 kernel
// (attention.cc), as on a CPU without the instructions. For tests and A/B benchmarks.
void set_bf16_dot_enabled(bool on);

// c (m, n) = [c +] bf16(a) (m, k) bf16(b) (k, n) with f32 sums: the operands are rounded to bf16
// (nearest even) as they are packed, and vdpbf16ps multiplies them in pairs of k, so each output
// sums its k products in f32 in pairs (products exact; FTZ/DAZ as the instruction has them). For
// the attention of bf16 tensors run widened (widen.cc): q, k, v and dO are bf16 values already
// and round exactly, so the only new rounding is of P to bf16, as flash attention and PyTorch's
// CPU flash kernel do for their P V products (dS stays f32: attention.cc says why). a(i, kk) = a[i
// * rs_a + kk * cs_a] with cs_a == 1 or rs_a == 1; b and c row-major (ldb, ldc). `tri` as
// tile_gemm's: outputs it says are unneeded may be computed or not; a's entries it says are zero
// must be zero. The packed operands live in the calling thread's buffers, kept between calls (a few
// KiB at the tiles of 64: under 130 KiB a thread at head dim 256).
void tile_gemm_bf16_dot(int m, int n, int k, const float* a, std::ptrdiff_t rs_a,
                        std::ptrdiff_t cs_a, const float* b, std::ptrdiff_t ldb, float* c,
                        std::ptrdiff_t ldc, bool accumulate, Tri tri);

}  // namespace lj::cpu::attn
