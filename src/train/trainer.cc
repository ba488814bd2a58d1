#include "train/trainer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "core/units.h"
#include "dist/batch_shard.h"
#include "models/hf_config.h"
#include "train/data_loader.h"
#include "train/eval.h"
#include "train/gpu_train.h"
#include "train/sharded_checkpoint.h"

namespace lj {
namespace {

// What must match for a checkpoint to be resumed by this run. A is the accumulation over all
// ranks (micro-batches per optimizer step), so one process with A = 6 and 2 ranks with 3 each
// resume each other's checkpoints: they train on the same global batches.
std::string fingerprint(const LlamaConfig& m, const TrainerConfig& c) {
  const Communicator* comm = c.step.data_parallel.comm;
  const int64_t world = comm != nullptr ? comm->world_size() : 1;
  return "L" + std::to_string(m.num_hidden_layers) + " C" + std::to_string(m.hidden_size) + " F" +
         std::to_string(m.intermediate_size) + " H" + std::to_string(m.num_attention_heads) + " G" +
         std::to_string(m.num_key_value_heads) + " D" + std::to_string(m.head_dim) + " V" +
         std::to_string(m.vocab_size) + " B" + std::to_string(c.batch_size) + " T" +
         std::to_string(c.seq_len) + " A" + std::to_string(c.grad_accum * world);
}

// What differs between two fingerprints, in words: "sequence length 128 in the checkpoint, 64
// in this run; ...". The letters are the checkpoint's format; users read the names.
std::string fingerprint_difference(const std::string& checkpoint, const std::string& run) {
  static const std::pair<char, const char*> kNames[] = {
      {'L', "layers"},
      {'C', "hidden size"},
      {'F', "intermediate size"},
      {'H', "attention heads"},
      {'G', "key-value heads"},
      {'D', "head dim"},
      {'V', "vocabulary"},
      {'B', "micro-batch"},
      {'T', "sequence length"},
      {'A', "micro-batches per step over all ranks"}};
  const auto fields = [](const std::string& fp) {
    std::map<char, std::string> m;
    std::istringstream words(fp);
    std::string w;
    while (words >> w) {
      if (!w.empty()) m[w[0]] = w.substr(1);
    }
    return m;
  };
  const auto a = fields(checkpoint), b = fields(run);
  std::string s;
  for (const auto& [key, name] : kNames) {
    const auto x = a.find(key), y = b.find(key);
    const std::string cx = x == a.end() ? "?" : x->second, cy = y == b.end() ? "?" : y->second;
    if (cx == cy) continue;
    s += (s.empty() ? "" : "; ") + std::string(name) + " " + cx + " in the checkpoint, " + cy +
         " in this run";
  }
  return s.empty() ? checkpoint + " against " + run : s;
}

void copy_into(std::vector<Tensor>& dst, const std::vector<Tensor>& src) {
  for (size_t i = 0; i < dst.size(); ++i) std::memcpy(dst[i].raw(), src[i].raw(), dst[i].bytes());
}

// A checkpoint's weights, AdamW moments and step count into the engine (a Checkpoint or a
// RankCheckpoint).
template <class Loaded>
Status restore(StepEngine& engine, const Loaded& ck) {
  LJ_RETURN_IF_ERROR(engine.pull_state());
  copy_into(engine.host_params(), ck.params);
  copy_into(engine.host_m(), ck.m);
  copy_into(engine.host_v(), ck.v);
  engine.set_optimizer_steps(ck.state.optimizer_steps);
  if (ck.state.loss_scale) engine.loss_scaler().restore(*ck.state.loss_scale);
  return engine.push_state(/*changed=*/true);
}

StatusOr<std::unique_ptr<StepEngine>> make_engine(const LlamaConfig& model, const TrainerConfig& c,
                                                  Device& dev) {
  if (c.device == TrainDevice::cuda) {
    LJ_ASSIGN_OR_RETURN(std::unique_ptr<GpuTrainStep> g, create_gpu_train_step(model, c.step, dev));
    return std::unique_ptr<StepEngine>(std::move(g));
  }
  LJ_ASSIGN_OR_RETURN(std::unique_ptr<TrainStep> t, TrainStep::create(model, c.step, dev));
  return std::unique_ptr<StepEngine>(std::move(t));
}

std::string exact(double x) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", x);
  return buf;
}

// The data's content as a rank sees it: FNV-1a of its first and last 65,536 tokens (a file
// another host holds at the same path with other tokens, or a rank reading another shard).
std::string token_sample(const TokenFile& f) {
  constexpr int64_t kEnd = 65536;
  std::vector<uint32_t> t;
  const int64_t n = f.size();
  for (int64_t i = 0; i < std::min(n, kEnd); ++i) t.push_back(f[i]);
  for (int64_t i = std::max(kEnd, n - kEnd); i < n; ++i) t.push_back(f[i]);
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(fnv1a64(t.data(), t.size() * sizeof(uint32_t))));
  return buf;
}

}  // namespace

void add_step_fingerprint(const LlamaConfig& model, const TrainStepConfig& step,
                          RunFingerprint* fp) {
  const DataParallel& dp = step.data_parallel;
  fp->add("model config", hf_config_json(model));
  fp->add("world size", dp.comm != nullptr ? dp.comm->world_size() : 1);
  fp->add("ZeRO stage", dp.zero.stage);
  fp->add("ZeRO buckets", std::to_string(dp.zero.reduce_bucket_size) + "/" +
                              std::to_string(dp.zero.allgather_bucket_size));
  fp->add("ZeRO overlap_comm and stage 3 settings",
          std::string(dp.zero.overlap_comm ? "overlap" : "no overlap") + " " +
              std::to_string(dp.zero.stage3_prefetch_bucket_size) + "/" +
              std::to_string(dp.zero.stage3_param_persistence_threshold));
  fp->add("seed", std::to_string(step.seed));
  const AdamWConfig& a = step.adamw;
  fp->add("AdamW", exact(a.beta1) + " " + exact(a.beta2) + " " + exact(a.eps) + " " +
                       exact(a.weight_decay) + " clip " + exact(step.grad_clip));
  const GraphOptions& g = step.graph;
  fp->add("compile", g.compile ? "on" : "off");
  fp->add("recompute", g.recompute.to_string(model.num_hidden_layers));
  const LossScaleConfig& ls = step.loss_scale;
  std::string precision = std::string(dtype_name(g.dtype)) + ", autocast " + dtype_name(g.autocast);
  if (ls.enabled) {
    precision += ", loss scale " + exact(ls.loss_scale) + " 2^" +
                 std::to_string(ls.initial_scale_power) + " window " +
                 std::to_string(ls.loss_scale_window) + " hysteresis " +
                 std::to_string(ls.hysteresis) + (ls.consecutive_hysteresis ? " consecutive" : "") +
                 " min " + exact(ls.min_loss_scale);
  }
  fp->add("precision", precision);
}

RunFingerprint training_fingerprint(const LlamaConfig& model, const TrainerConfig& c,
                                    const TokenFile& train_data, const TokenFile* val_data) {
  RunFingerprint fp;
  add_step_fingerprint(model, c.step, &fp);
  fp.add("device", c.device == TrainDevice::cuda ? "cuda" : "cpu");
  fp.add("batch size", c.batch_size).add("sequence length", c.seq_len);
  fp.add("gradient accumulation", c.grad_accum);
  fp.add("training data", train_data.path() + " (" + std::to_string(train_data.size()) +
                              " tokens, " + std::to_string(train_data.token_bytes()) +
                              " bytes each)");
  fp.add("training data content", token_sample(train_data));
  fp.add("validation data", val_data == nullptr
                                ? "none"
                                : val_data->path() + " (" + std::to_string(val_data->size()) +
                                      " tokens, sample " + token_sample(*val_data) + ")");
  fp.add("steps", c.steps).add("checkpoint every", c.checkpoint_every);
  fp.add("evaluation", std::to_string(c.val_every) + " every, " + std::to_string(c.val_batches));
  fp.add("output folder", c.out_dir);
  std::string lr;
  for (int64_t s : {int64_t{0}, c.steps / 2, c.steps - 1})
    lr += exact(c.lr_fn ? c.lr_fn(s) : c.lr.at(s)) + " ";
  fp.add("learning rate at steps 0, n/2, n-1", lr);
  return fp;
}

StatusOr<TrainSummary> run_training(const LlamaConfig& model, const std::vector<Tensor>* initial,
                                    const TokenFile& train_data, const TokenFile* val_data,
                                    const TrainerConfig& c, Device& dev,
                                    const std::atomic<bool>* stop, const TrainerCallbacks& cb) {
  Communicator* comm = c.step.data_parallel.comm;
  // Several ranks: the same run everywhere, checked before anything can fail on one rank alone.
  if (comm != nullptr) {
    LJ_RETURN_IF_ERROR(
        check_same_on_all_ranks(*comm, training_fingerprint(model, c, train_data, val_data)));
  }
  // A rank-local result as one every rank returns (one process: unchanged).
  auto agreed = [&](Status s) { return comm != nullptr ? agree_on_status(*comm, s) : s; };
  if (c.steps <= 0)
    return invalid_argument("--steps must be positive, got " + std::to_string(c.steps));
  if (c.grad_accum <= 0) return invalid_argument("--grad-accum must be positive");
  if (c.seq_len > model.max_position_embeddings) {
    return invalid_argument("--seq-len " + std::to_string(c.seq_len) +
                                " is above the model's max_position_embeddings " +
                                std::to_string(model.max_position_embeddings),
                            "use a shorter --seq-len");
  }
  auto info = [&](const std::string& s) {
    if (cb.info) cb.info(s);
  };
  std::optional<DataLoader> loader_slot;
  std::unique_ptr<StepEngine> trainer;
  {
    auto l = DataLoader::create(train_data, c.batch_size, c.seq_len, model.vocab_size);
    Status s = l.status();
    if (l.ok()) {
      loader_slot.emplace(std::move(*l));
      auto t = make_engine(model, c, dev);
      s = t.status();
      if (t.ok()) trainer = std::move(*t);
    }
    LJ_RETURN_IF_ERROR(agreed(s));
  }
  DataLoader& loader = *loader_slot;
  if (c.step.graph.compile) info("compile: on\n" + trainer->compile_log());
  if (initial != nullptr) {
    LJ_RETURN_IF_ERROR(trainer->pull_state());  // ZeRO-3: whole parameters to write into
    copy_into(trainer->host_params(), *initial);
    LJ_RETURN_IF_ERROR(trainer->push_state(/*changed=*/true));
  }

  TrainerState state;
  state.seed = c.step.seed;
  state.fingerprint = fingerprint(model, c);
  TrainSummary summary;
  if (comm == nullptr) {
    auto resumed = load_latest_checkpoint(c.out_dir, trainer->param_specs(), dev);
    if (resumed.ok()) {
      if (resumed->state.fingerprint != state.fingerprint) {
        return invalid_argument(
            "the checkpoint in " + c.out_dir + " is from another run: " +
                fingerprint_difference(resumed->state.fingerprint, state.fingerprint),
            "use a new --out folder, or the same model and batch settings");
      }
      state = resumed->state;
      LJ_RETURN_IF_ERROR(restore(*trainer, *resumed));
      loader.set_position(state.data_position);
      summary.resumed = true;
      summary.resumed_from = state.step;
      info("resumed from " + latest_checkpoint_dir(c.out_dir) + " (step " +
           std::to_string(state.step) + ")");
    } else if (resumed.status().code() != StatusCode::not_found) {
      return resumed.status().with_context("resuming from " + c.out_dir);
    }
  } else {
    // Every rank must resume the same step folder: compare before reading it.
    const std::string step_dir = latest_checkpoint_dir(c.out_dir);
    LJ_RETURN_IF_ERROR(check_same_on_all_ranks(
        *comm, RunFingerprint().add("checkpoint to resume", step_dir.empty() ? "none" : step_dir)));
    if (!step_dir.empty()) {
      const int stage = c.step.data_parallel.zero.stage;
      auto resumed = load_checkpoint_for_rank(
          step_dir, trainer->param_specs(), stage,
          flat_layout_of(trainer->param_specs(), comm->world_size()), comm->rank(), dev);
      LJ_RETURN_IF_ERROR(agreed(resumed.status()).with_context("resuming from " + step_dir));
      if (resumed->state.fingerprint != state.fingerprint) {
        return invalid_argument(
            "the checkpoint in " + c.out_dir + " is from another run: " +
                fingerprint_difference(resumed->state.fingerprint, state.fingerprint),
            "use a new --out folder, or the same model and global batch (micro-batch x "
            "accumulation x ranks)");
      }
      state = resumed->state;
      LJ_RETURN_IF_ERROR(restore(*trainer, *resumed));
      summary.resumed = true;
      summary.resumed_from = state.step;
      info("resumed from " + step_dir + " (step " + std::to_string(state.step) + ", written by " +
           std::to_string(resumed->saved_world_size) + " rank(s) at ZeRO stage " +
           std::to_string(resumed->saved_zero_stage) + ")");
    }
  }

  auto save = [&]() -> Status {
    const double t0 = now_seconds();
    if (c.step.loss_scale.enabled) state.loss_scale = trainer->loss_scaler().state();
    if (comm != nullptr) {
      // ZeRO-3: the whole parameters for the checkpoint's weights (freed after).
      LJ_RETURN_IF_ERROR(trainer->pull_state());
      const ShardedCheckpoint ck{state, c.step.data_parallel.zero.stage, &trainer->host_params(),
                                 &trainer->host_m(), &trainer->host_v()};
      const Status saved =
          save_sharded_checkpoint(*comm, c.out_dir, model, trainer->param_specs(), ck, c.keep_last);
      LJ_RETURN_IF_ERROR(trainer->push_state(/*changed=*/false));
      LJ_RETURN_IF_ERROR(saved);
    } else {
      LJ_RETURN_IF_ERROR(trainer->pull_state());
      const Checkpoint ck{state, trainer->host_params(), trainer->host_m(), trainer->host_v()};
      const Status saved =
          save_checkpoint(c.out_dir, model, trainer->param_specs(), ck, c.keep_last);
      LJ_RETURN_IF_ERROR(trainer->push_state(/*changed=*/false));
      LJ_RETURN_IF_ERROR(saved);
    }
    info("checkpoint " + c.out_dir + "/step-" + std::to_string(state.step) + " (" +
         format_seconds(now_seconds() - t0) + ")");
    return ok_status();
  };
  auto evaluate_now = [&]() -> Status {
    if (val_data == nullptr) return ok_status();
    EvalOptions o;
    o.batch_size = c.batch_size;
    o.seq_len = c.seq_len;
    o.max_batches = c.val_batches;
    o.autocast = c.step.graph.autocast;  // the run's precision (bf16: casts as in training)
    auto evaluated = trainer->evaluate(*val_data, o);
    LJ_RETURN_IF_ERROR(agreed(evaluated.status()));
    const EvalResult& r = *evaluated;
    if (cb.on_eval) cb.on_eval(EvalMetrics{state.step, r.loss, r.perplexity});
    return ok_status();
  };

  if (summary.resumed && (comm == nullptr || comm->rank() == 0)) {
    LJ_RETURN_IF_ERROR(agreed(prune_checkpoints(c.out_dir, c.keep_last)));
  } else if (summary.resumed) {
    LJ_RETURN_IF_ERROR(agreed(ok_status()));
  }
  if (cb.on_start) {
    LJ_RETURN_IF_ERROR(agreed(cb.on_start()));
  } else if (comm != nullptr) {
    LJ_RETURN_IF_ERROR(agreed(ok_status()));
  }
  // This rank's micro-batches of a step, as global micro-batch indices from the step's start.
  const int world = comm != nullptr ? comm->world_size() : 1;
  const std::vector<int64_t> my_micro_batches =
      rank_micro_batches(0, c.grad_accum, comm != nullptr ? comm->rank() : 0, world);
  int64_t bad_in_a_row = 0;
  while (state.step < c.steps) {
    bool stopping = stop != nullptr && stop->load();
    if (comm != nullptr) {  // any rank asked to stop: all stop at this step
      auto any = comm->all_reduce_sum(stopping ? 1.0 : 0.0);
      if (!any.ok()) abort_all_ranks(*comm, any.status());
      stopping = *any > 0;
    }
    if (stopping) {
      summary.stopped_by_signal = true;
      break;
    }
    const double lr = c.lr_fn ? c.lr_fn(state.step) : c.lr.at(state.step);
    const double t0 = now_seconds();
    std::vector<MicroBatch> micro(static_cast<size_t>(c.grad_accum));
    if (comm == nullptr) {
      for (auto& mb : micro) loader.next(dev, &mb.tokens, &mb.targets);
    } else {
      for (size_t j = 0; j < micro.size(); ++j) {
        loader.set_position(state.data_position + my_micro_batches[j] * c.batch_size);
        loader.next(dev, &micro[j].tokens, &micro[j].targets);
      }
    }
    auto stepped = trainer->step(micro, lr);
    // One rank failing inside a step leaves the others in a collective: end them all.
    if (!stepped.ok() && comm != nullptr) abort_all_ranks(*comm, stepped.status());
    LJ_RETURN_IF_ERROR(stepped.status());
    const StepResult& r = *stepped;
    const double dt = now_seconds() - t0;
    if (r.updated) {
      bad_in_a_row = 0;
      ++state.optimizer_steps;
    } else {
      ++state.skipped_steps;
      // An fp16 overflow is the loss scaler's business (it lowers the scale, and fails at the
      // minimum); only other non-finite steps count towards max_bad_steps.
      if (!r.overflow) ++bad_in_a_row;
    }
    ++state.step;
    ++summary.steps_run;
    state.data_position = comm == nullptr
                              ? loader.position()
                              : state.data_position + world * c.grad_accum * c.batch_size;
    if (cb.on_step) {
      StepMetrics m{state.step,  r.loss,
                    r.grad_norm, lr,
                    dt,          c.batch_size * c.seq_len * c.grad_accum,
                    !r.updated,  state.skipped_steps};
      m.device_memory_peak = trainer->device_memory_peak();
      if (c.step.loss_scale.enabled) {
        m.loss_scale = r.loss_scale;
        m.overflow = r.overflow;
        m.overflow_total = trainer->loss_scaler().state().overflows;
        m.next_loss_scale = trainer->loss_scaler().scale();
      }
      cb.on_step(m);
    }
    if (bad_in_a_row >= c.max_bad_steps) {
      return internal_error(
          "loss or gradient was not finite for " + std::to_string(bad_in_a_row) +
              " steps in a row (last at step " + std::to_string(state.step) + ")",
          "lower --lr, check the data, or resume from the last checkpoint in " + c.out_dir);
    }
    if (c.val_every > 0 && state.step % c.val_every == 0) LJ_RETURN_IF_ERROR(evaluate_now());
    if (c.checkpoint_every > 0 && state.step % c.checkpoint_every == 0 && state.step < c.steps) {
      LJ_RETURN_IF_ERROR(save());
    }
  }
  if (summary.steps_run > 0) LJ_RETURN_IF_ERROR(save());
  summary.final_step = state.step;
  if (c.step.loss_scale.enabled) {
    summary.overflow_steps = trainer->loss_scaler().state().overflows;
    summary.final_loss_scale = trainer->loss_scaler().scale();
  }
  return summary;
}

}  // namespace lj
