// The GPU step's training state (train/gpu_train.h) in the CPU's host form, and back. On the
// device the parameters are one flat f32 vector (dist/zero.h's FlatLayout order, padded to
// numel_padded), and AdamW's m and v either cover the whole flat vector (stage 0: numel elements)
// or this rank's shard (stage 1: shard_numel, the padding included). The host form is the one
// checkpoints hold (train/step_engine.h): parameters per spec; m and v per spec at stage 0, one
// shard tensor each at stage 1.
//
// Every copy goes through `copy` (cudaMemcpy on the GPU, memcpy in the host tests), so the
// layout arithmetic a GPU checkpoint depends on is checked without a GPU.
#pragma once

#include <functional>
#include <vector>

#include "dist/zero.h"
#include "models/llama.h"
#include "runtime/tensor.h"

namespace lj {

// Copies `bytes` from src to dst (device or host pointers, as the caller's memory is).
using CopyBytes = std::function<Status(void* dst, const void* src, size_t bytes)>;

// Where the flat state lives (device pointers on the GPU).
struct FlatState {
  float* params = nullptr;  // numel_padded
  float* m = nullptr;       // flat_state_numel(layout, stage) each
  float* v = nullptr;
};

// m's and v's element count on the device for `stage` (0 or 1).
int64_t flat_state_numel(const FlatLayout& layout, int stage);

// The flat state into new host tensors (f32, counted as weights and optimizer state).
Status flat_state_to_host(const FlatLayout& layout, int stage, const std::vector<ParamSpec>& specs,
                          const FlatState& flat, const CopyBytes& copy, Device& host,
                          std::vector<Tensor>* params, std::vector<Tensor>* m,
                          std::vector<Tensor>* v);

// The host form into the flat state; shapes are checked (an internal error when they differ).
Status host_to_flat_state(const FlatLayout& layout, int stage, const std::vector<ParamSpec>& specs,
                          const std::vector<Tensor>& params, const std::vector<Tensor>& m,
                          const std::vector<Tensor>& v, const CopyBytes& copy,
                          const FlatState& flat);

// The GPU step's gradient buckets (several ranks): the flat vector's [0, numel) cut into ranges of
// at most `bucket_numel` elements (split_buckets), and per parameter the buckets its range
// overlaps. A bucket may start its all-reduce once every parameter overlapping it has its
// gradient in the flat gradient; waits() says how many that is for each.
struct GradBuckets {
  std::vector<FlatRange> buckets;
  std::vector<std::vector<size_t>> of_param;
  std::vector<size_t> waits() const;
};
GradBuckets grad_buckets(const FlatLayout& layout, int64_t bucket_numel);

}  // namespace lj
