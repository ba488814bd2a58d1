// CUDA kernels of cross-entropy (f32 and bf16 logits, f32 math, i32 and i64 labels):
//   cross_entropy(logits (N, V), labels (N)) -> loss () f32
//     mean over rows with label != ignore_index of logsumexp(row) - row[label]; NaN (0/0) when
//     no row counts, as PyTorch. One block per row writes its loss to workspace, then one block
//     adds them in a fixed order and divides by the count.
//   cross_entropy_backward(logits, labels, dloss ()) -> dlogits (N, V)
//     (softmax(row) - onehot(label)) * dloss / num_valid; zero rows for ignored labels.
//   linear_cross_entropy(x (N, C), w (V, C), labels (N)) -> loss () f32, dx (N, C), dw (V, C)
//     without the (N, V) logits: chunks of rows (attr chunk; 0: workspace.h, up to 512 MiB of f32
//     logits) through cuBLASLt (gemm.h): logits = x w^T in f32, each row's loss and, in place,
//     dlogits for dloss = 1, then dx = dlogits w and dw += dlogits^T x (3 GEMMs a chunk).
// A label outside [0, V) that is not ignore_index is an out_of_range Status naming the first
// such row, as on the CPU: learning it costs one stream synchronisation per call.
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

Status cross_entropy_forward(KernelContext& c, const KernelEnv& env);
Status cross_entropy_backward(KernelContext& c, const KernelEnv& env);
Status linear_cross_entropy_forward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
