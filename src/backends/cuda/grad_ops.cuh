// What a training step does to gradients on the GPU outside the graph (train/cuda/): accumulate
// micro-batches, scale (averaging), and the sum of squares behind the global gradient norm. f32,
// device pointers, asynchronous on env.stream.
//
// The sum of squares is reproducible bit for bit run to run: a fixed grid of kSquareBlocks blocks
// each sums a fixed strided set of elements in f64, and one block adds the partial sums in order
// (no atomics), so a resumed run computes the same norm, hence the same clipping, as the run it
// continues.
#pragma once

#include <cstdint>
#include <span>

#include "backends/cuda/kernels.h"

namespace lj::cuda {

inline constexpr int kSquareBlocks = 512;

// acc[k] += g[k], k < n.
Status accumulate_f32(float* acc, const float* g, int64_t n, const KernelEnv& env);
// x[k] *= s, k < n.
Status scale_f32(float* x, float s, int64_t n, const KernelEnv& env);
// A gradient tensor: `n` f32 values on the device.
struct GradSpan {
  const float* x = nullptr;
  int64_t n = 0;
};
// *out (one double on the device) = the sum of x^2 over every element of every span, summed in
// f64: each span into kSquareBlocks partial sums, then all partials in order. `partials`: device
// scratch of spans.size() * kSquareBlocks doubles. The result depends on how the values are cut
// into spans: callers cut them by parameter.
Status sum_squares_f32(std::span<const GradSpan> spans, double* partials, double* out,
                       const KernelEnv& env);

}  // namespace lj::cuda
