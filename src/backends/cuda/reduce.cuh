// CUDA reductions sum, mean, max over any set of axes (attr axes, empty: all; keepdim), f32 and
// bf16 storage, f32 accumulation: one block per output element, its threads striding over the
// reduced elements (any axes, rank <= 8), then a block reduction. Correct for every layout;
// fast when the reduced axes are the innermost (contiguous) ones.
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

Status reduce_forward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
