// The CPU backend: fp32 and fp64 kernels (fp64 for gradient checks), parallel over OpenMP
// threads with static partitions so results are bitwise reproducible for a given thread count.
// GEMMs go through oneDNN or the in-tree AVX-512 GEMM (gemm.h); attention is tiled flash-style.
#pragma once

#include "backends/kernel.h"

namespace lj::cpu {

// The CPU kernel table (every op of graph/ops.def except `input`, which the executor feeds).
const KernelTable& kernels();

// Rows per chunk of linear_cross_entropy's f32 kernel for n rows of x and a vocabulary of
// `vocab` (loss.cc): the GEMMs it runs per chunk, for the planner's time model.
int64_t linear_cross_entropy_chunk_rows(const Attrs& attrs, int64_t n, int64_t vocab);
// Columns per vocabulary block of that kernel for hidden size `dim` (loss.cc): one thread takes
// each block from its logits to its gradient. On gemm.h's GEMMs (per_block_gemms) each block's dw
// GEMM runs alone on one thread, for the planner's pricing of its packing buffers.
int64_t linear_cross_entropy_vocab_block(const Attrs& attrs, int64_t vocab, int64_t dim);

// Per-family registration, one per file; kernels() calls them all.
void register_source(KernelTable& t);       // source.cc: constant, iota, random_*
void register_elementwise(KernelTable& t);  // elementwise.cc: unary, binary, compare, where, cast
void register_reduce(KernelTable& t);       // reduce.cc: sum, mean, max, softmax, log_softmax
void register_matmul(KernelTable& t);       // matmul.cc: matmul, matmul_add
void register_movement(
    KernelTable& t);  // movement.cc: permute, slice, concat, expand, gather, scatter_add
void register_loss(KernelTable& t);       // loss.cc: cross_entropy(_backward), linear_cross_entropy
void register_attention(KernelTable& t);  // attention.cc: sdpa(_backward)
void register_opaque(KernelTable& t);     // opaque.cc: host callbacks
void register_collective(KernelTable& t);  // collective.cc: the collectives (unbound; ep_* alone)
void register_fused(KernelTable& t);       // fused.cc: fused_pointwise (the kernel IR interpreter)
// moe.cc: topk, moe_sort, grouped_matmul(_wgrad)
void register_moe(KernelTable& t);
// Fused ops of pattern fusion.
void register_norm(KernelTable& t);    // norm.cc: rms_norm, add_rms_norm, rms_norm_backward
void register_swiglu(KernelTable& t);  // swiglu.cc: swiglu(_backward)
void register_rope(KernelTable& t);    // rope.cc: rope
// widen.cc: every kernel not marked `bf16` (and every kernel on f16) runs by widening: its 16-bit
// inputs are converted into f32 workspace, it runs in f32, and its f32 results are rounded to
// nearest even into the 16-bit outputs (so each op rounds once, as the 16-bit kernels do).
void widen_half_kernels(KernelTable& t);

}  // namespace lj::cpu
