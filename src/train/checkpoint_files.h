// The JSON files of a checkpoint folder, parsed from text with every field checked: they may come
// from another machine or a damaged disk, so nothing in them is trusted (docs/limits.md).
//   trainer_state.json  TrainerState (train/checkpoint.h writes it)
//   manifest.json       what a sharded checkpoint holds where (train/sharded_checkpoint.h)
// Depends only on core/ and nlohmann-json, so the fuzz targets (tests/fuzz/) build it alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

#include "train/loss_scaler.h"

namespace lj {

// Hostile files: trainer_state.json and manifest.json larger than this are refused before
// parsing (real ones are under 1 KiB plus ~150 bytes per rank).
constexpr uint64_t kMaxCheckpointJsonBytes = 16ull << 20;
// A manifest naming more optimizer shards than this is refused (one per rank).
constexpr int64_t kMaxManifestShards = 1 << 20;

struct TrainerState {
  int64_t step = 0;             // optimizer steps completed
  int64_t optimizer_steps = 0;  // AdamW's t (skipped steps do not count)
  int64_t data_position = 0;    // windows consumed by the data loader
  int64_t skipped_steps = 0;    // non-finite loss or gradient, update skipped
  uint64_t seed = 0;
  std::string fingerprint;  // model + batch shape: resuming with another run is refused
  // fp16 runs: the loss scaler (train/loss_scaler.h), so that a resume is bit-exact; written as
  // "loss_scale" only when present.
  std::optional<LossScaleState> loss_scale;
};

// TrainerState as trainer_state.json holds it, and back (`where` names the file in errors).
std::string trainer_state_json(const TrainerState& state);
StatusOr<TrainerState> parse_trainer_state(const std::string& text, const std::string& where);

constexpr const char* kShardedCheckpointFormat = "ljperf-sharded-checkpoint";
constexpr int kShardedCheckpointVersion = 1;

// One file a manifest names: a plain file name inside the step folder (no '/', not "." or
// ".."), its size and CRC-32C.
struct ManifestFile {
  std::string file;
  int rank = 0;
  int64_t bytes = 0;
  uint32_t crc32c = 0;
};
// An optimizer shard: elements [begin, end) of the flat vector.
struct ManifestShard : ManifestFile {
  int64_t begin = 0, end = 0;
};
struct ShardedManifest {
  TrainerState state;
  int world_size = 1;  // >= 1
  int zero_stage = 0;  // 0..3
  int64_t numel = 0;   // parameters in the flat vector, >= 0
  ManifestFile parameters;
  std::vector<ManifestShard> optimizer_shards;  // tile [0, numel) in order
};
// The manifest, checked: format and version, every field's type and range, the shards tiling
// [0, numel). `where` names the file in errors.
StatusOr<ShardedManifest> parse_sharded_manifest(const std::string& text, const std::string& where);

}  // namespace lj
