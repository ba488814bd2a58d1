// CUDA kernels of scaled dot-product attention (f32 and bf16 storage, f32 math):
//   sdpa(q (B, H, Tq, D), k (B, G, Tk, D), v (B, G, Tk, D)) -> out (B, H, Tq, D), lse (B, H, Tq)
//   sdpa_backward(q, k, v, out, lse, dout) -> dq, dk, dv
// q head h reads kv head h / (H / G); causal: query i sees keys 0..i (Tq == Tk); a window W > 0
// (causal) hides keys j <= i - W, on the plain kernels only; scale <= 0 means 1 / sqrt(D). As
// backends/cpu/attention.cc: P = exp(scale S - lse), Di = rowsum(dO ∘ O), dS = P ∘ (dO Vᵀ - Di), dQ
// = scale dS K, dK = scale dSᵀ Q, dV = Pᵀ dO.
//
// Head dims up to 128 (f32 and bf16, sm_80 and later) run the flash kernels
// (flash_attention.cuh: tiled, online softmax, bf16 on tensor cores). Other calls run the plain
// kernels here (D <= 256): the forward is one block per (query, head, batch) streaming the keys
// in chunks of the block size with an online softmax; the backward is one block per query for
// dQ (and Di, kept in workspace) and one block per (key, kv head, batch) for dK and dV, summing
// over the group's heads and the queries in a fixed order (deterministic, no atomics).
// Both paths ask for the same workspace: B * H * Tq f32 (Di) in the backward.
// LJ_CUDA_FLASH=0 in the environment runs the plain kernels for every call.
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

Status sdpa_forward(KernelContext& c, const KernelEnv& env);
Status sdpa_backward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
