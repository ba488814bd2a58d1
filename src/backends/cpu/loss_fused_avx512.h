// The f32 fused loss (linear_cross_entropy, loss.cc) built from the in-tree GEMM's packing and
// micro-kernel (sgemm_avx512_kernels.h), for hosts where gemm.h's own_sgemm_enabled(). The
// contract and numerics are loss.cc's blocked f32 kernel's: chunks of rows in order, vocabulary
// blocks of vb columns owned by one thread from logits to gradient, exps relative to each block's
// row max, the thread's dx partial rescaled by its running row max, rows combined after a
// barrier, dw from the exps with the row scales; loss and dw do not depend on the thread count,
// dx does through the running maxima (reproducible for a given count).
//
// What differs is the layout, so that w_b is read where it lies and x[chunk] is packed once per
// chunk instead of once per block:
//   logits: Lᵀ_b (len, m) = w_b x[chunk]ᵀ, w_b's rows the A rows; x[chunk]ᵀ a B operand.
//   stats: down Lᵀ_b's columns, a vector of rows at a time (no horizontal reductions).
//   dx: Pᵀ (C, m) += w_bᵀ e_bᵀ, w_bᵀ's k steps w's rows; e_bᵀ copied into B panels.
//   dw: dw_b = (e_b ⊙ c_b)ᵀ x[chunk], the row scales c_b applied while e_b's rows are copied
//       into A panels; x[chunk] a B operand packed once per chunk.
// w_b is read in place by the micro-kernel when its row stride spreads over L1's sets (`small`'s
// C = 288, 18 lines); a row stride of 64 lines (C = 1024) puts every row in one set, and there
// w_b's panels are packed just before use instead. On dnnl_sgemm and the own GEMM called per
// block (loss.cc), each of the three GEMMs packed both operands. Measured in
// bench/archive/speed.md, session 12.
#pragma once

#include <cstdint>

namespace lj::cpu {

struct LceAvx512Shape {
  int64_t rows = 0;   // rows per chunk
  int64_t dim = 0;    // C
  int64_t vocab = 0;  // V
  int64_t vb = 0;     // vocabulary block width
  int threads = 1;
};

// Thread t's vocabulary blocks [first, last) of `blocks` blocks of vb columns (the last may be
// short): the cut before thread t falls at the block edge nearest t * V / threads, so every
// thread's columns are within half a block of the mean. (OpenMP's static schedule gave the first
// threads one block more: on `small`'s 63 blocks of 512, 16384 columns on thread 0 against 15616
// on thread 1, and each chunk waits for the longer.) A function of the thread count only, so dx
// stays reproducible. Both f32 kernels split blocks this way.
struct LceBlockRange {
  int64_t first, last;
};
LceBlockRange lce_block_range(int t, int threads, int64_t vocab, int64_t vb, int64_t blocks);

// Floats of scratch the kernel needs (a multiple of 16; the scratch must be 64-byte aligned).
int64_t lce_avx512_scratch_floats(const LceAvx512Shape& s);

// Runs every chunk of the n rows. labels (n): ignored rows hold `ignore`; every other label is
// in [0, V). g: 1 / (rows that count). Writes row_loss (n) (each row's logsumexp - logit[y]; 0
// for ignored rows), dx (n, C) and dw (V, C). Requires n, C and V above 0.
void lce_avx512(const LceAvx512Shape& s, int64_t n, const float* x, const float* w,
                const int64_t* labels, int64_t ignore, float g, float* dx, float* dw,
                float* row_loss, float* scratch);

}  // namespace lj::cpu
