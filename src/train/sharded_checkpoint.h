// Checkpoints of a data-parallel run (ZeRO stages 0-3, dist/zero.h), written by every rank and
// resumable at any world size, as DeepSpeed's universal checkpoints are. A sharded step folder:
//   model.safetensors                      parameters, full, f32, HF names (rank 0)
//   config.json                            the model's HF config (rank 0)
//   optimizer-rank-RRRRR-of-WWWWW.safetensors
//                                          AdamW m and v ("m", "v": 1-D f32) for one flat element
//                                          range; stages 1-3: each rank its shard, stage 0: rank 0
//                                          all of [0, numel)
//   manifest.json                          what is where (below); written last, by rank 0
// So the folder is also an HF model folder: `ljperf export`/`eval` read model.safetensors as is.
//
// Why rank 0 writes the full parameters rather than each rank its slice: at stages 0-2 every rank
// holds every parameter (only optimizer states and, at 2, gradients are sharded), so rank 0 has
// them without a gather; one whole file keeps the step folder an HF folder and needs no
// resharding on load. DeepSpeed stages 1/2 do the same (mp_rank_00_model_states.pt). The
// optimizer states (8 bytes per parameter against 4) are the part that is sharded. Stage 3 holds
// only a shard of the parameters: they are gathered whole for the save (TrainStep::gather_params)
// and freed after, so the files are the same at every stage.
//
// manifest.json: {"format": "ljperf-sharded-checkpoint", "version": 1, "step", "world_size",
// "zero_stage", "flat_layout": {"numel", "numel_padded", "padding", "shard_numel"},
// "trainer_state": {step, optimizer_steps, data_position, skipped_steps, seed, fingerprint},
// "parameters": {"file", "rank", "bytes", "crc32c"}, "optimizer_shards": [{"file", "rank",
// "begin", "end", "bytes", "crc32c"}, ...]}. Ranges are in the flat vector (parameters end to
// end in model order) and never include the padding, whose m and v are zero; so a reader at
// another world size (other padding, other partition) takes the ranges it needs from whichever
// files hold them. crc32c is the CRC-32C of the whole file, checked by every reader.
//
// Commit protocol: rank 0 makes `step-N.tmp.<pid of rank 0>/`; every rank writes its files
// (each fsynced, renamed, the folder fsynced: io/safetensors.h); an all-reduce of every rank's
// result is the barrier after which all data is durable; only then rank 0 writes the manifest,
// renames the folder to `step-N/`, fsyncs the parent and replaces `latest` atomically. A failure
// on any rank is an error on every rank (dist/communicator.h agree_on_status), and nothing is
// committed. The ranks must share the file system (one host, or a shared --out).
#pragma once

#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/zero.h"
#include "train/checkpoint.h"

namespace lj {

// What one rank saves.
struct ShardedCheckpoint {
  TrainerState state;
  int zero_stage = 0;
  const std::vector<Tensor>* params = nullptr;  // full, in specs order (equal on every rank)
  // Stage 0: per parameter (equal on every rank; rank 0 writes them). Stages 1/2: one tensor (S),
  // this rank's shard of the flat vector (FlatLayout::shard(rank)).
  const std::vector<Tensor>* m = nullptr;
  const std::vector<Tensor>* v = nullptr;
};

// Collective: every rank calls it with the same dir, state and stage. Writes and commits
// `dir/step-<state.step>` as above, then (rank 0) prunes to `keep_last` like save_checkpoint.
// Every rank returns the same ok or error.
Status save_sharded_checkpoint(Communicator& comm, const std::string& dir,
                               const LlamaConfig& config, const std::vector<ParamSpec>& specs,
                               const ShardedCheckpoint& ckpt, int keep_last);

// One rank's part of a checkpoint, shaped for its optimizer.
struct RankCheckpoint {
  TrainerState state;
  std::vector<Tensor> params;  // full, in specs order
  // zero_stage 0 (or one process): per parameter, in specs order; 1/2: one tensor (S) each, this
  // rank's shard under `layout` (its padding zero).
  std::vector<Tensor> m, v;
  int saved_world_size = 1;  // 1 for a one-process checkpoint
  int saved_zero_stage = 0;
  bool sharded = false;  // the folder has a manifest (written by save_sharded_checkpoint)
};

// Reads what rank `rank` of `layout.world_size()` at `zero_stage` needs from `step_dir`: a sharded
// folder written at any world size and stage, or a one-process folder (train/checkpoint.h).
// Errors name the file: a missing or damaged manifest, a checksum or size mismatch, shards that
// do not cover the flat vector, or another model (another element count).
StatusOr<RankCheckpoint> load_checkpoint_for_rank(const std::string& step_dir,
                                                  const std::vector<ParamSpec>& specs,
                                                  int zero_stage, const FlatLayout& layout,
                                                  int rank, Device& dev);

// The flat layout of a model's parameters over `world_size` ranks (as FlatLayout::of the tensors).
FlatLayout flat_layout_of(const std::vector<ParamSpec>& specs, int world_size);

// Whether `step_dir` is a sharded checkpoint (has manifest.json).
bool is_sharded_checkpoint(const std::string& step_dir);

}  // namespace lj
