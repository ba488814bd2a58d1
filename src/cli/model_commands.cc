// The commands on model folders: `ljperf eval` (loss and perplexity of an HF model folder on a
// token file), `ljperf init` (a freshly initialised HF model folder from a preset or a
// config.json) and `ljperf export` (a training checkpoint, with its tokenizer, as an HF folder).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/cli.h"
#include "cli/data_sample.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "cli/run_config.h"
#include "cli/run_flags.h"
#include "cli/tokenizer_files.h"
#include "core/units.h"
#include "io/safetensors.h"
#include "models/hf_config.h"
#include "train/checkpoint.h"
#include "train/eval.h"
#include "train/hf_model.h"
#include "train/train_step.h"

namespace lj::cli {
namespace {

// The settings eval shares with benchmark and train (model, micro-batch, sequence, precision,
// threads) are RunFlags and go through resolve_run, as theirs do.
struct EvalArgs {
  RunFlags f;  // f.model: the folder given; the weights folder is resolved from it
  std::string data;
  std::string data_format = "auto";
  int64_t max_batches = 0;  // --val-batches (train's name for the same count)
  std::string dump_logits;
  std::string tokenizer;  // a decoded sample of the data is printed when given
};

// The settings of resolve_run that eval reads, in its printout.
const std::vector<std::string> kEvalConfigKeys = {"model", "micro_batch", "seq_len", "precision",
                                                  "threads"};

// The weights eval scores: an HF model folder, a `ljperf train --out` folder (its latest
// checkpoint, as `ljperf export` takes it) or one of its step folders. A preset or config.json
// has no weights: refused, saying how to make some.
StatusOr<std::string> eval_weights_dir(const std::string& model) {
  namespace fs = std::filesystem;
  const std::string latest = latest_checkpoint_dir(model);
  if (!latest.empty()) return latest;
  if (fs::is_directory(model)) return model;
  if (model.ends_with(".json") || llama_preset(model).ok() || model.starts_with("deepspeed/")) {
    return invalid_argument(
        "--model " + model + " has no weights (a preset or config.json only sets the shape)",
        "give an HF model folder or a `ljperf train --out` folder; `ljperf init --model " + model +
            " --out DIR` writes freshly initialised weights");
  }
  return not_found("--model " + model + ": no such folder",
                   "give an HF model folder or a `ljperf train --out` folder");
}

Status run_eval(const EvalArgs& a) {
  TokenFormat fmt;
  if (!parse_token_format(a.data_format, &fmt)) {
    return invalid_argument("unknown --data-format '" + a.data_format + "'",
                            "use auto, llmc, megatron, u16 or u32");
  }
  LJ_ASSIGN_OR_RETURN(const std::string weights, eval_weights_dir(a.f.model));
  RunFlags f = a.f;
  f.model = weights;
  LJ_ASSIGN_OR_RETURN(const ResolvedRun run, resolve_run(f, RunSettings{}, 1, 0, "self"));
  const DType precision = run.precision;
  fmt::print("{}", describe_config(select_config(run.config, kEvalConfigKeys)));
  Device dev(f.threads);
  LJ_ASSIGN_OR_RETURN(HfModel model, load_hf_model(weights, dev));
  LJ_ASSIGN_OR_RETURN(TokenFile data, TokenFile::open(a.data, fmt));
  if (!a.tokenizer.empty()) {
    LJ_ASSIGN_OR_RETURN(std::string sample, decoded_sample(a.tokenizer, data));
    fmt::print("data sample (first 64 tokens, decoded): {}\n", sample);
  }
  Progress progress("eval", "batches");
  Tensor logits;
  EvalOptions o;
  o.batch_size = run.micro_batch;
  o.seq_len = run.seq_len;
  o.max_batches = a.max_batches;
  o.autocast = precision;
  o.progress = [&](int64_t done, int64_t total) { progress.update(done, total); };
  if (!a.dump_logits.empty()) o.first_logits = &logits;
  LJ_ASSIGN_OR_RETURN(EvalResult r, evaluate(model, data, o, dev));
  progress.finish();
  if (!a.dump_logits.empty()) {
    LJ_RETURN_IF_ERROR(
        write_safetensors(a.dump_logits, {{"logits", DType::f32, logits.dims(), logits.raw()}}));
  }
  fmt::print("model {} ({:.2f}M params), data {} ({} tokens, {})\n", a.f.model,
             static_cast<double>(model.config.num_params()) / 1e6, a.data, data.size(),
             token_format_name(data.format()));
  if (precision != DType::f32) {
    fmt::print("precision: {} mixed (f32 weights cast to {} at their use, f32 loss)\n",
               precision == DType::bf16 ? "bf16" : "fp16", dtype_name(precision));
  }
  fmt::print("loss {:.6f}  perplexity {:.4f}  over {} tokens in {} batches of {} x {}\n", r.loss,
             r.perplexity, r.tokens, r.batches, o.batch_size, o.seq_len);
  return ok_status();
}

struct InitArgs {
  std::string model = "small";
  std::string out;
  uint64_t seed = 1234;
  std::string max_shard_size = "5GB";  // HF save_pretrained's max_shard_size and units
  int64_t max_shard_mb = 0;            // --max-shard-mb (the old name); 0: not given
};

// --max-shard-size as HF's save_pretrained reads it: "5GB" is 5e9 bytes, "2GiB" 2^31.
StatusOr<int64_t> max_shard_bytes(const InitArgs& a) {
  if (a.max_shard_mb > 0) return a.max_shard_mb * 1'000'000;
  const StatusOr<double> bytes = parse_bytes(a.max_shard_size);
  if (!bytes.ok() || *bytes < 1) {
    return invalid_argument("--max-shard-size: cannot read '" + a.max_shard_size + "' as a size",
                            "e.g. --max-shard-size 5GB (HF's units: GB = 1e9 bytes, GiB = 2^30)");
  }
  return static_cast<int64_t>(*bytes);
}

Status run_init(const InitArgs& a) {
  // Found as benchmark and train find it: a preset, deepspeed/<preset>, a config.json or an HF
  // folder (its config; the weights are fresh).
  LJ_ASSIGN_OR_RETURN(const int64_t shard_bytes, max_shard_bytes(a));
  LJ_ASSIGN_OR_RETURN(const ModelRef ref, resolve_model(a.model));
  const LlamaConfig& c = ref.config;
  Device dev(0);
  const auto specs = llama_param_specs(c);
  const auto params = init_llama_params(dev, specs, c.initializer_range, a.seed);
  HfSaveOptions save;
  save.max_shard_bytes = shard_bytes;
  LJ_RETURN_IF_ERROR(save_hf_model(a.out, c, specs, params, save));
  fmt::print("wrote {} ({}, {:.2f}M params, seed {})\n", a.out, c.name,
             static_cast<double>(c.num_params()) / 1e6, a.seed);
  return ok_status();
}

struct ExportArgs {
  std::string src;
  std::string hf_out;
  std::string dtype = "auto";  // auto: the config's torch_dtype
};

Status run_export(const ExportArgs& a) {
  namespace fs = std::filesystem;
  // A training folder (with `latest`) or one step folder.
  std::string step_dir = latest_checkpoint_dir(a.src);
  if (step_dir.empty()) step_dir = a.src;
  if (!fs::exists(step_dir + "/model.safetensors") &&
      !fs::exists(step_dir + "/model.safetensors.index.json")) {
    return not_found(a.src + " is not a checkpoint (no latest, no model.safetensors)",
                     "give the --out folder of `ljperf train` or one of its step-N folders");
  }
  DType dtype = DType::f32;
  // The names --precision takes (f32/fp32/float32, bf16/bfloat16, f16/fp16/float16).
  if (a.dtype != "auto" && !parse_precision(a.dtype, &dtype)) {
    return invalid_argument("unknown --dtype '" + a.dtype + "'",
                            "use auto (the config's torch_dtype), f32, bf16 or fp16");
  }
  Device dev(0);
  LJ_ASSIGN_OR_RETURN(HfModel m, load_hf_model(step_dir, dev));
  if (a.dtype == "auto") dtype = m.config.torch_dtype;
  // The tokenizer the run kept (train --tokenizer): in the step folder, else the run's folder.
  std::vector<std::string> tokenizer = tokenizer_files_in(step_dir);
  if (tokenizer.empty()) tokenizer = tokenizer_files_in(fs::path(step_dir).parent_path().string());
  HfSaveOptions save;
  save.dtype = dtype;
  save.extra_files = tokenizer;
  LJ_RETURN_IF_ERROR(save_hf_model(a.hf_out, m.config, m.specs, m.params, save));
  fmt::print(
      "exported {} to {} ({:.2f}M params, {} weights{}{})\n", step_dir, a.hf_out,
      static_cast<double>(m.config.num_params()) / 1e6, dtype_name(dtype),
      a.dtype == "auto" ? ": the config's torch_dtype" : "",
      tokenizer.empty() ? "; no tokenizer: train without --tokenizer" : ", with its tokenizer");
  return ok_status();
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* sub =
      app.add_subcommand("eval", "Mean loss and perplexity of an HF model folder on a token file");
  a->f.app = sub;
  sub->add_option("--model", a->f.model,
                  "HF model folder (config.json + safetensors), or a `ljperf train --out` folder "
                  "(its latest checkpoint) or one of its step folders")
      ->required();
  sub->add_option("--data", a->data, "Token file (llm.c .bin, Megatron .bin/.idx, raw u16/u32)")
      ->required();
  sub->add_option("--data-format", a->data_format, "auto, llmc, megatron, u16 or u32")
      ->capture_default_str();
  // The checks are benchmark's (add_run_flags): a value is refused at parse, naming the flag.
  sub->add_option("--batch-size", a->f.batch_size, "Windows per batch")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--seq-len", a->f.seq_len, "Tokens per window")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--val-batches", a->max_batches,
                  "Batches to score, as train's --val-batches (0: the whole file)")
      ->capture_default_str();
  add_renamed_option(sub, "--max-batches", "--val-batches", "train's name for the same count",
                     &a->max_batches);
  sub->add_option("--threads", a->f.threads, "CPU threads (0: all)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (or its folder): print the data's first tokens as text");
  sub->add_option("--precision", a->f.precision,
                  "f32, bf16 or fp16 (mixed: 16-bit activations and GEMMs, f32 loss)")
      ->capture_default_str();
  sub->add_option("--dump-logits", a->dump_logits,
                  "Write the first batch's logits to this safetensors file");
  return {sub, [a] { return run_eval(*a); }};
}

Command add_init_command(CLI::App& app) {
  auto a = std::make_shared<InitArgs>();
  CLI::App* sub = app.add_subcommand("init", "Write a freshly initialised HF model folder");
  sub->add_option("--model", a->model,
                  "Preset, deepspeed/<preset>, config.json, or an HF model folder (its config)")
      ->capture_default_str();
  sub->add_option("--out", a->out, "New folder to write (must not exist)")->required();
  sub->add_option("--seed", a->seed, "Initialisation seed")->capture_default_str();
  sub->add_option("--max-shard-size", a->max_shard_size,
                  "Split the weights into shards of at most this size (HF save_pretrained's "
                  "max_shard_size: 5GB = 5e9 bytes, 2GiB = 2^31)")
      ->capture_default_str();
  add_renamed_option(sub, "--max-shard-mb", "--max-shard-size",
                     "a size with its unit, as HF writes it", &a->max_shard_mb)
      ->check(CLI::PositiveNumber);
  return {sub, [a] { return run_init(*a); }};
}

Command add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* sub = app.add_subcommand("export", "Write a training checkpoint as an HF model folder");
  sub->add_option("checkpoint", a->src, "`ljperf train --out` folder, or one step-N folder")
      ->required();
  sub->add_option("--hf", a->hf_out, "New HF model folder to write")->required();
  sub->add_option("--dtype", a->dtype,
                  "Weights written: f32, bf16 or fp16 (the names --precision takes; rounded to "
                  "nearest even from the f32 master "
                  "weights); auto: the config's torch_dtype")
      ->capture_default_str();
  return {sub, [a] { return run_export(*a); }};
}

}  // namespace lj::cli
