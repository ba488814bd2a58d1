// ZeRO stages 0-3 as DeepSpeed means them (core/zero_config.h), over a Communicator: the data
// layout and the collectives. The optimizer arithmetic stays in train/ (train/zero_optimizer.h
// applies AdamW to the shard these functions describe), because dist/ sits below train/
// (docs/architecture.md).
//
// The flat vector: every parameter, in parameter order, laid end to end (numel elements), then
// padded with zeros to a multiple of the world size as DeepSpeed pads (numel_padded). Rank r owns
// the contiguous shard [r * S, (r + 1) * S), S = numel_padded / world_size; only the last ranks'
// shards can reach into the padding. A shard cuts parameters wherever it falls: AdamW is
// elementwise, so a slice of a parameter is updated like the whole.
//
//   stage 0: gradients all-reduced (averaged); every rank keeps full optimizer states.
//   stage 1: gradients all-reduced; AdamW m and v only for the rank's shard; the rank updates
//            its shard of the parameters, then the parameters are all-gathered.
//   stage 2: as 1, but gradients are reduce-scattered: after reduction a rank holds only its
//            shard's gradient. (The full gradient from backward still exists until then.)
//   stage 3: as 2, and the parameters are sharded too: a rank holds only its shard of the flat
//            vector; each parameter is all-gathered before its use in forward and again in
//            backward and freed after (passes/collectives/grad_sync.h), and AdamW updates the
//            shard in place (nothing to gather after the step).
//
// Buckets: a collective moves at most reduce_bucket_size (gradients) or allgather_bucket_size
// (parameters) elements in total, counted over all ranks as DeepSpeed counts them; the
// collectives are split into buckets of that size, each packed into one contiguous buffer.
//
// Where the gradient reductions run: TrainStep's joint graph carries them as collective nodes
// (passes/collectives/grad_sync.h places them during backward, train/grad_sync.h runs them);
// all_reduce_grads and reduce_scatter_grads below are the same reductions after backward, for a
// graph without those nodes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/zero_config.h"
#include "dist/communicator.h"
#include "runtime/tensor.h"

namespace lj {

// Data parallelism for a training step: none when comm is null (one process, as before).
struct DataParallel {
  Communicator* comm = nullptr;  // not owned; must outlive the TrainStep
  ZeroConfig zero;
  // Expert parallelism (--expert-parallel N > 1): the expert-parallel group of this rank, N
  // consecutive ranks of comm's (train/expert_parallel.h); the sparse layers exchange their
  // routed rows over it, and the rank holds only its E / N experts. Null: every rank holds and
  // runs every expert. Not owned.
  Communicator* experts = nullptr;
  // With `experts`: the expert-data-parallel group, the W / N ranks that hold this rank's
  // experts (ranks N apart): the experts' gradients are averaged, and ZeRO shards their
  // optimizer states, over it (train/expert_params.h). Not owned.
  Communicator* expert_data = nullptr;
  // The gradients' sum over the ranks is divided by this; 0: comm's world size. The experts'
  // group divides by the whole world's size: an expert's gradient on its rank already sums the
  // rows of its N token-sharing ranks.
  int grad_divisor = 0;
  int divisor() const { return grad_divisor > 0 ? grad_divisor : comm->world_size(); }
};

// [begin, end) in the flat vector.
struct FlatRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const FlatRange&) const = default;
};

// Where part of a flat range lies in one parameter: elements [param_offset, param_offset +
// count) of parameter `param` are flat elements [flat_offset, flat_offset + count).
struct FlatPiece {
  size_t param = 0;
  int64_t param_offset = 0;
  int64_t flat_offset = 0;
  int64_t count = 0;
  bool operator==(const FlatPiece&) const = default;
};

class FlatLayout {
 public:
  // numels: each parameter's element count, in parameter order.
  FlatLayout(std::vector<int64_t> numels, int world_size);
  static FlatLayout of(const std::vector<Tensor>& params, int world_size);

  int world_size() const { return world_size_; }
  int64_t numel() const { return numel_; }
  int64_t numel_padded() const { return numel_padded_; }
  int64_t shard_numel() const { return numel_padded_ / world_size_; }
  FlatRange shard(int rank) const;
  // What ZeRO shards at `stage`, asked in one place (llm.c's multi_gpu_get_shard_offset): state
  // that `stage` shards (zero_shards(stage, what), core/zero_config.h) is held by each rank for
  // its shard only, anything else whole.
  //   held: the elements of [0, numel) rank `rank` holds: its shard without the padding (empty
  //         where a shard lies all in the padding), or all of them.
  //   held_numel: what each rank allocates for it: shard_numel (the padding included, the same
  //         on every rank), or numel.
  FlatRange held(int rank, int stage, ZeroSharded what) const;
  int64_t held_numel(int stage, ZeroSharded what) const;
  int64_t param_begin(size_t i) const { return begin_[i]; }
  size_t num_params() const { return numels_.size(); }
  // The pieces of parameters that cover `r`, in order; the padding has none.
  std::vector<FlatPiece> pieces(FlatRange r) const;

 private:
  std::vector<int64_t> numels_;
  std::vector<int64_t> begin_;  // flat offset of each parameter
  int world_size_;
  int64_t numel_ = 0, numel_padded_ = 0;
};

// `r` cut into consecutive ranges of at most bucket_numel elements (bucket_numel >= 1).
std::vector<FlatRange> split_buckets(FlatRange r, int64_t bucket_numel);

// Elements per rank in one reduce-scatter or all-gather of a `bucket_numel` bucket over
// `world_size` ranks: bucket_numel / world_size, at least 1.
int64_t per_rank_bucket(int64_t bucket_numel, int world_size);

// The packing buffers of the collectives below, in f32 elements (each allocated as workspace for
// the call and freed at its end): the one place their sizes are computed.
//   all_reduce_grads: min(reduce_bucket_size, numel)
//   reduce_scatter_grads: min(reduce_bucket_size / N, shard) x N (send)
//   all_gather_params: min(allgather_bucket_size / N, shard) (send) and that x N (recv), together
int64_t all_reduce_buffer_numel(const FlatLayout& layout, int64_t reduce_bucket_size);
int64_t reduce_scatter_buffer_numel(const FlatLayout& layout, int64_t reduce_bucket_size);
int64_t all_gather_send_numel(const FlatLayout& layout, int64_t allgather_bucket_size);

// What one rank of a ZeRO run holds beside the parameters and backward's gradients, in f32
// elements, in the order train/zero_optimizer.h allocates it: for the memory predictor, which
// replays it in its dry run (plan/graph_figures.h). Padding: stages 1-2 size states by the padded
// shard, ceil(numel / N) elements, so a rank holds at most N - 1 elements more than numel / N.
struct ZeroMemory {
  int64_t adam_state_numel = 0;  // m and v each: numel at stage 0, shard_numel at 1-3
  // Stages 2, 3: the reduced gradient shard, from the step's first reduction into it (its first
  // bucket's wait, or the optimizer step without collectives in the graph) to the step's end.
  int64_t grad_shard_numel = 0;
  int64_t param_shard_numel = 0;  // stage 3: the parameters are this shard only
  // One step, after backward: the gradient collective's buffer (all-reduce at 0-1,
  // reduce-scatter at 2), freed; stage 2 then frees the full gradients; stages 1-2 then
  // all-gather the parameters through a send and a receive buffer.
  int64_t reduce_buffer_numel = 0;
  int64_t gather_send_numel = 0, gather_recv_numel = 0;
  bool frees_full_grads = false;  // stage 2
};
ZeroMemory zero_memory(const FlatLayout& layout, const ZeroConfig& zero);

// Copies flat range `r` of `tensors` (f32, laid out by `layout`) into out[0, r.size()); the
// padding reads as zeros.
void pack_flat(const FlatLayout& layout, const std::vector<Tensor>& tensors, FlatRange r,
               float* out);
// Writes in[0, r.size()) * scale into flat range `r` of `tensors`; the padding is dropped.
void unpack_flat(const FlatLayout& layout, const float* in, float scale, FlatRange r,
                 std::vector<Tensor>& tensors);

// Stages 0 and 1: grads (f32, one per parameter) become the sum over ranks times `scale` (1 /
// world_size averages), in buckets of reduce_bucket_size elements.
Status all_reduce_grads(Communicator& comm, Device& dev, const FlatLayout& layout,
                        std::vector<Tensor>& grads, int64_t reduce_bucket_size, float scale);
// Stage 2: shard_out[0, S) = (sum over ranks of the rank's shard of grads) * scale, in
// reduce-scatter buckets of reduce_bucket_size elements in total. grads are not changed.
Status reduce_scatter_grads(Communicator& comm, Device& dev, const FlatLayout& layout,
                            const std::vector<Tensor>& grads, int64_t reduce_bucket_size,
                            float scale, float* shard_out);
// Stages 1 and 2: every rank's shard of params goes to every rank, in all-gather buckets of
// allgather_bucket_size elements in total.
Status all_gather_params(Communicator& comm, Device& dev, const FlatLayout& layout,
                         std::vector<Tensor>& params, int64_t allgather_bucket_size);

}  // namespace lj
