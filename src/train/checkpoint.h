// Training checkpoints that survive crashes. A checkpoint is a folder `step-N/` holding
//   model.safetensors      parameters (HF names, f32)
//   optimizer.safetensors  AdamW moments m.<name>, v.<name> (f32)
//   trainer_state.json     step, optimizer step, data position, counters, run fingerprint
//   config.json            the model's HF config
// Commit protocol: written into `step-N.tmp.<pid>/`, every file fsynced, the
// folder fsynced, renamed to `step-N/`, the parent fsynced, then `latest` (a one-line file
// naming the folder) replaced atomically. A reader trusts only what `latest` names.
#pragma once

#include <string>
#include <vector>

#include "models/llama.h"
#include "runtime/tensor.h"
#include "train/checkpoint_files.h"

namespace lj {

struct Checkpoint {
  TrainerState state;
  std::vector<Tensor> params, m, v;  // in specs order
};

// Writes `dir/step-<state.step>` and points `dir/latest` at it; then deletes committed
// checkpoints beyond the newest `keep_last` (0: keep all) and stale temporaries.
Status save_checkpoint(const std::string& dir, const LlamaConfig& config,
                       const std::vector<ParamSpec>& specs, const Checkpoint& ckpt, int keep_last);

// Deletes committed checkpoints beyond the newest `keep_last` (0: keep all; the one `latest`
// names is always kept) and temporaries left by writers that died (step-N.tmp.*, latest.tmp.*).
Status prune_checkpoints(const std::string& dir, int keep_last);

// The checkpoint `dir/latest` names, or not_found when there is none. A checkpoint that exists
// but is damaged is an error naming the file.
StatusOr<Checkpoint> load_latest_checkpoint(const std::string& dir,
                                            const std::vector<ParamSpec>& specs, Device& dev);
// Loads one checkpoint folder (for export). A sharded folder (train/sharded_checkpoint.h) written
// at any world size is gathered into this one-process form.
StatusOr<Checkpoint> load_checkpoint(const std::string& step_dir,
                                     const std::vector<ParamSpec>& specs, Device& dev);
// The folder `dir/latest` names ("" when none).
std::string latest_checkpoint_dir(const std::string& dir);

// Pieces shared with train/sharded_checkpoint.h.
// Tensors `prefix + spec.name` for every spec from a safetensors file: f32, shapes checked.
StatusOr<std::vector<Tensor>> read_checkpoint_tensors(const std::string& path,
                                                      const std::vector<ParamSpec>& specs,
                                                      const std::string& prefix,
                                                      MemCategory category, Device& dev);
}  // namespace lj
