// CUDA data movement: permute, slice, concat, expand (any dtype, by element size: one strided
// copy kernel over an iteration space, source and destination offsets from per-dim strides,
// rank <= 8), gather (embedding lookup) and scatter_add (its backward: zero, then rows added in
// increasing n per column, deterministic; bf16 accumulates in f32 workspace and rounds once).
// reshape has no kernel: it aliases its input. gather and scatter_add check every id first and
// return out_of_range naming the first bad one (one stream synchronisation).
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

Status permute_forward(KernelContext& c, const KernelEnv& env);
Status slice_forward(KernelContext& c, const KernelEnv& env);
Status concat_forward(KernelContext& c, const KernelEnv& env);
Status expand_forward(KernelContext& c, const KernelEnv& env);
Status gather_forward(KernelContext& c, const KernelEnv& env);
Status scatter_add_forward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
