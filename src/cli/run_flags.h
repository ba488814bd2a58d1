// The run configuration the commands share: one set of flags (RunFlags, registered by
// add_run_flags on benchmark and train; plan and eval register the ones they take under their
// own help texts), one resolver (resolve_run) from the preset or HF folder, the DeepSpeed JSON,
// the flags and the environment, and one printout of every resolved value with where it came
// from (ResolvedRun::lines, printed at start and written into the JSON record; plan and eval
// print the lines that apply to them, select_config).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/run_config.h"
#include "dist/communicator.h"
#include "plan/host_plan.h"

namespace CLI {
class App;
}  // namespace CLI

namespace lj::cli {

struct RunFlags {
  std::string model = "small";    // --model: preset, deepspeed/<preset>, config.json, HF folder
  std::string deepspeed;          // --deepspeed FILE (flags win over it)
  std::string precision = "f32";  // --precision f32|bf16|fp16
  int64_t batch_size = 4;         // --batch-size: sequences per rank per micro-step
  int64_t seq_len = 256;          // --seq-len
  int64_t grad_accum = 1;         // --grad-accum: micro-steps per optimizer step, per rank
  double lr = 3e-4;               // --lr: AdamW's (peak) learning rate
  bool compile = false;           // --compile, or LJ_COMPILE=1 in the environment
  bool ckpt_opt = false;          // --ckpt-opt, or CHECKPOINT_OPTIMIZATION=true
  std::string memory_limit;       // --memory-limit for --ckpt-opt ("": 90% of available)
  std::string device = "auto";    // --device auto|cpu|cuda (cli/device_choice.h)
  int threads = 0;                // --threads (0: all cores)
  uint64_t seed = 1234;           // --seed: weights and (benchmark) synthetic tokens
  int zero = -1;                  // --zero N; -1: not given
  double comm_timeout_s = 600;    // --comm-timeout (PyTorch's default)
  int expert_parallel = 1;        // --expert-parallel N: experts sharded over N ranks
  RecomputeFlags recompute;       // --recompute, --recompute-method, --recompute-layers
  // plan: a --seq-len left at its default is capped at the model's max_position_embeddings
  // (benchmark and train refuse a sequence longer than the model's context).
  bool cap_default_seq_len = false;
  // Flags typed with a value that stands for "not given" (plan's --precision auto).
  std::vector<std::string> defaulted;
  CLI::App* app = nullptr;
  // Whether the user typed `flag` (its value then wins over the DeepSpeed JSON); false for a
  // flag the command does not have.
  bool given(const char* flag) const;
};

// Registers RunFlags on a command (benchmark, train): the same names, meanings and checks.
// `lr_help` is the command's word for --lr ("AdamW learning rate", "Peak learning rate").
void add_run_flags(CLI::App* sub, RunFlags* f, const std::string& lr_help);

// One resolved value and where it came from: a flag ("--batch-size"), the DeepSpeed JSON or
// recipe ("deepspeed/zero3_bf16: auto"), the environment ("LJ_COMPILE=1"), the launcher, the
// preset, or ljperf's "default".
struct ConfigLine {
  std::string key, value, origin;
};
using ConfigLines = std::vector<ConfigLine>;

// What a run trains with, resolved once by resolve_run; benchmark, train, plan and eval read it
// (benchmark and train add their own fields by deriving from it, never by copying it). Every
// value has its origin: the step's settings and the model in `config`, each DeepSpeed key in
// ds->resolved, each ZeRO value in dp's *_origin fields.
struct ResolvedRun : StepSettings {   // micro-batch, accumulation, precision, the step's settings
  ModelRef model;                     // the preset, config.json or HF folder, and its recipe
  int64_t seq_len = 0;                // tokens per sequence (--seq-len; plan: capped default)
  std::optional<DeepSpeedConfig> ds;  // the DeepSpeed JSON or recipe (the flags won inside it)
  DataParallelSettings dp;            // world size, rank, communicator, ZeRO stage and buckets
  bool ckpt_opt = false;  // checkpoint optimization requested (--ckpt-opt, CHECKPOINT_OPTIMIZATION)
  std::string memory_limit;  // checkpoint optimization's budget as typed ("": 90% of available)
  int threads = 0;           // CPU threads (0: all cores)
  uint64_t seed = 0;         // weights and (benchmark) synthetic tokens
  int expert_parallel = 1;   // --expert-parallel N (checked against the model and the world)
  // The planner's view of this rank's parallelism, with `threads_` per rank (plan/host_plan.h).
  HostParallel host_parallel(int threads_) const {
    return HostParallel{
        .world_size = dp.world_size,
        .zero = dp.zero,
        .rank = dp.rank,
        .threads = threads_,
        .experts = ExpertShard{.size = expert_parallel, .rank = dp.rank % expert_parallel}};
  }
  // Every resolved value with its origin, in the order printed (describe_config) and written
  // into every JSON record (config_json).
  ConfigLines config;
};

// "run configuration:" and one line per value, for printing at start.
std::string describe_config(const ConfigLines& lines);
// {key: {"value": ..., "from": ...}} for the JSON record.
nlohmann::ordered_json config_json(const ConfigLines& lines);
// A value decided after resolution (checkpoint optimization's recompute, the device plan
// prices): replaces `key`'s value, and its origin when `origin` is not empty.
void set_config_value(ConfigLines* lines, const std::string& key, const std::string& value,
                      const std::string& origin = "");
// The lines of `keys`, in the resolver's order (a command prints the settings that apply to it).
ConfigLines select_config(const ConfigLines& lines, const std::vector<std::string>& keys);

// `run` holds the command's own settings (steps, warmup, weight decay, clipping: assigned with
// whether their flag was given); the shared ones are taken from `f` here. Checks every value
// once, before any work.
StatusOr<ResolvedRun> resolve_run(const RunFlags& f, RunSettings run, int world_size, int rank,
                                  const std::string& backend);

}  // namespace lj::cli
