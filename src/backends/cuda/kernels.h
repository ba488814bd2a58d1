// The CUDA backend's kernel table: the same KernelContext as every backend (backends/kernel.h)
// with device pointers in its TensorViews, plus what a device kernel needs beside the tensors
// (KernelEnv: the stream, the cuBLASLt handle and its workspace). Kernels are named
// <op>_forward / <op>_backward in their family file (norm.cu, swiglu.cu, rope.cu, loss.cu,
// attention.cu, gemm.cc, fused.cc), each .cu beside its .cuh, and listed here by Op.
// KernelContext::workspace, when a kernel asks for scratch, hands out DEVICE memory.
// Every launch is asynchronous on env.stream; a Status is for what the data gets wrong (a label
// past the vocabulary), which costs the kernel one synchronisation to learn.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "backends/kernel.h"

namespace lj::cuda {

struct KernelEnv {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* gemm_workspace = nullptr;  // device memory for cuBLASLt
  size_t gemm_workspace_bytes = 0;
  int multiprocessors = 1;
  // Embedding and cross-entropy check every id against the table (token ids, labels): a read of
  // the verdict that synchronises the stream. false while a CUDA graph is captured (no host
  // synchronisation may happen then): the caller has checked the ids on the host instead.
  bool check_ids = true;
};

using CudaKernelFn = Status (*)(KernelContext& c, const KernelEnv& env);

// f32 and bf16 (loads widen to f32, math in f32, stores round to nearest even) unless a
// family file says otherwise; nullptr: no CUDA kernel for that op yet.
struct CudaKernelTable {
  CudaKernelFn fn[kNumOps] = {};
  CudaKernelFn& operator[](Op op) { return fn[static_cast<int>(op)]; }
  CudaKernelFn operator[](Op op) const { return fn[static_cast<int>(op)]; }
};

const CudaKernelTable& kernels();

void register_source(CudaKernelTable& t);       // source.cu: constant, iota
void register_elementwise(CudaKernelTable& t);  // elementwise.cu: unary, binary, cast
void register_reduce(CudaKernelTable& t);       // reduce.cu: sum, mean, max
void register_movement(
    CudaKernelTable& t);  // movement.cu: permute slice concat expand gather scatter_add
void register_norm(CudaKernelTable& t);    // norm.cu: rms_norm, add_rms_norm, rms_norm_backward
void register_swiglu(CudaKernelTable& t);  // swiglu.cu: swiglu(_backward)
void register_rope(CudaKernelTable& t);    // rope.cu: rope
void register_loss(CudaKernelTable& t);  // loss.cu: cross_entropy(_backward), linear_cross_entropy
void register_attention(CudaKernelTable& t);  // attention.cu: sdpa(_backward)
void register_gemm(CudaKernelTable& t);       // gemm.cc: matmul, matmul_add (cuBLASLt)

}  // namespace lj::cuda
