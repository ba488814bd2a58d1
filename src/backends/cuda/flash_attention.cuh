// The flash-attention kernels (flash_attention.h's block bodies run as CUDA kernels): sdpa
// forward and backward for head dims up to kFlashMaxD, f32 and bf16 storage. attention.cu calls
// these when flash_supports() says so and falls back to its plain kernels otherwise.
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

inline constexpr int64_t kFlashMaxD = 128;

struct SdpaDims {
  int64_t b, h, g, tq, tk, d;
  bool causal;
  float scale;
  int64_t window;  // 0: none; else (causal) query i sees keys i - window < j <= i
};

// Whether the flash kernels take this call: no sliding window (the plain kernels take those),
// d <= kFlashMaxD, f32 or bf16, and the device grants
// the shared memory of the head dim's tiles (up to 150 KiB: f32 at d = 128; bf16 at most 68 KiB).
bool flash_supports(const SdpaDims& dm, DType dt);

// sdpa: c.in = q, k, v; c.out = out, lse. sdpa_backward: c.in = q, k, v, out, lse, dout;
// c.out = dq, dk, dv; its workspace is one f32 per query row (Di), B * H * Tq * 4 bytes.
Status flash_forward(KernelContext& c, const KernelEnv& env, const SdpaDims& dm);
Status flash_backward(KernelContext& c, const KernelEnv& env, const SdpaDims& dm);

}  // namespace lj::cuda
