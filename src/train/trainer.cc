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
  fp->add("expert-parallel size", dp.experts != nullptr ? dp.experts->world_size() : 1);
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

namespace {

// The settings a run cannot start with, every rank alike.
Status check_settings(const LlamaConfig& model, const TrainerConfig& c) {
  if (c.steps <= 0)
    return invalid_argument("--steps must be positive, got " + std::to_string(c.steps));
  if (c.grad_accum <= 0) return invalid_argument("--grad-accum must be positive");
  if (c.seq_len > model.max_position_embeddings) {
    return invalid_argument("--seq-len " + std::to_string(c.seq_len) +
                                " is above the model's max_position_embeddings " +
                                std::to_string(model.max_position_embeddings),
                            "use a shorter --seq-len");
  }
  return ok_status();
}

Status another_run(const std::string& out_dir, const std::string& checkpoint,
                   const std::string& run, const std::string& hint) {
  return invalid_argument("the checkpoint in " + out_dir +
                              " is from another run: " + fingerprint_difference(checkpoint, run),
                          hint);
}

// One call of run_training: the engine, the data and the state it trains, and the steps of the
// run in the order run_training takes them. With several ranks every rank holds one, and each
// step that can fail on one rank alone returns an agreed status (or ends every rank).
class TrainingRun {
 public:
  TrainingRun(const LlamaConfig& model, const TokenFile* val_data, const TrainerConfig& c,
              Device& dev, const TrainerCallbacks& cb)
      : model_(model),
        val_data_(val_data),
        c_(c),
        dev_(dev),
        cb_(cb),
        comm_(c.step.data_parallel.comm) {
    state_.seed = c.step.seed;
    state_.fingerprint = fingerprint(model, c);
    world_ = comm_ != nullptr ? comm_->world_size() : 1;
    // This rank's micro-batches of a step, as global micro-batch indices from the step's start.
    my_micro_batches_ =
        rank_micro_batches(0, c.grad_accum, comm_ != nullptr ? comm_->rank() : 0, world_);
  }

  // The data loader and the step engine, agreed by every rank.
  Status open(const TokenFile& train_data) {
    auto l = DataLoader::create(train_data, c_.batch_size, c_.seq_len, model_.vocab_size);
    Status s = l.status();
    if (l.ok()) {
      loader_.emplace(std::move(*l));
      auto t = make_engine(model_, c_, dev_);
      s = t.status();
      if (t.ok()) engine_ = std::move(*t);
    }
    LJ_RETURN_IF_ERROR(agreed(s));
    if (c_.step.graph.compile) info("compile: on\n" + engine_->compile_log());
    return ok_status();
  }

  // `initial` (optional): the starting weights, in place of the seeded ones.
  Status load_initial(const std::vector<Tensor>* initial) {
    if (initial == nullptr) return ok_status();
    LJ_RETURN_IF_ERROR(engine_->pull_state());  // ZeRO-3: whole parameters to write into
    copy_into(engine_->host_params(), *initial);
    return engine_->push_state(/*changed=*/true);
  }

  // The latest checkpoint in the output folder, when there is one.
  Status resume() { return comm_ == nullptr ? resume_one_process() : resume_ranks(); }

  // After validation and before the first step: old checkpoints pruned, on_start called, and
  // every rank past both.
  Status start() {
    if (summary_.resumed && (comm_ == nullptr || comm_->rank() == 0)) {
      LJ_RETURN_IF_ERROR(agreed(prune_checkpoints(c_.out_dir, c_.keep_last)));
    } else if (summary_.resumed) {
      LJ_RETURN_IF_ERROR(agreed(ok_status()));
    }
    if (cb_.on_start) return agreed(cb_.on_start());
    if (comm_ != nullptr) return agreed(ok_status());
    return ok_status();
  }

  bool done() const { return state_.step >= c_.steps; }

  // Whether `stop` was set on any rank: all stop at this step.
  bool stop_requested(const std::atomic<bool>* stop) {
    bool stopping = stop != nullptr && stop->load();
    if (comm_ != nullptr) {
      auto any = comm_->all_reduce_sum(stopping ? 1.0 : 0.0);
      if (!any.ok()) abort_all_ranks(*comm_, any.status());
      stopping = *any > 0;
    }
    if (stopping) summary_.stopped_by_signal = true;
    return stopping;
  }

  // One optimizer step, then its evaluation and checkpoint when they are due.
  Status step() {
    const double lr = c_.lr_fn ? c_.lr_fn(state_.step) : c_.lr.at(state_.step);
    const double t0 = now_seconds();
    const std::vector<MicroBatch> micro = next_micro_batches();
    auto stepped = engine_->step(micro, lr);
    // One rank failing inside a step leaves the others in a collective: end them all.
    if (!stepped.ok() && comm_ != nullptr) abort_all_ranks(*comm_, stepped.status());
    LJ_RETURN_IF_ERROR(stepped.status());
    const double dt = now_seconds() - t0;
    count_step(*stepped);
    report_step(*stepped, lr, dt);
    LJ_RETURN_IF_ERROR(check_bad_steps());
    if (c_.val_every > 0 && state_.step % c_.val_every == 0) LJ_RETURN_IF_ERROR(evaluate());
    if (c_.checkpoint_every > 0 && state_.step % c_.checkpoint_every == 0 &&
        state_.step < c_.steps) {
      LJ_RETURN_IF_ERROR(save());
    }
    return ok_status();
  }

  // The last checkpoint (when a step ran) and the run's summary.
  StatusOr<TrainSummary> finish() {
    if (summary_.steps_run > 0) LJ_RETURN_IF_ERROR(save());
    summary_.final_step = state_.step;
    if (c_.step.loss_scale.enabled) {
      summary_.overflow_steps = engine_->loss_scaler().state().overflows;
      summary_.final_loss_scale = engine_->loss_scaler().scale();
    }
    return summary_;
  }

 private:
  // A rank-local result as one every rank returns (one process: unchanged).
  Status agreed(const Status& s) const { return comm_ != nullptr ? agree_on_status(*comm_, s) : s; }
  void info(const std::string& s) const {
    if (cb_.info) cb_.info(s);
  }

  Status resume_one_process() {
    auto resumed = load_latest_checkpoint(c_.out_dir, engine_->param_specs(), dev_);
    if (!resumed.ok()) {
      if (resumed.status().code() == StatusCode::not_found) return ok_status();
      return resumed.status().with_context("resuming from " + c_.out_dir);
    }
    if (resumed->state.fingerprint != state_.fingerprint) {
      return another_run(c_.out_dir, resumed->state.fingerprint, state_.fingerprint,
                         "use a new --out folder, or the same model and batch settings");
    }
    state_ = resumed->state;
    LJ_RETURN_IF_ERROR(restore(*engine_, *resumed));
    loader_->set_position(state_.data_position);
    summary_.resumed = true;
    summary_.resumed_from = state_.step;
    info("resumed from " + latest_checkpoint_dir(c_.out_dir) + " (step " +
         std::to_string(state_.step) + ")");
    return ok_status();
  }

  Status resume_ranks() {
    // Every rank must resume the same step folder: compare before reading it.
    const std::string step_dir = latest_checkpoint_dir(c_.out_dir);
    LJ_RETURN_IF_ERROR(check_same_on_all_ranks(
        *comm_,
        RunFingerprint().add("checkpoint to resume", step_dir.empty() ? "none" : step_dir)));
    if (step_dir.empty()) return ok_status();
    const int stage = c_.step.data_parallel.zero.stage;
    auto resumed = load_checkpoint_for_rank(
        step_dir, engine_->param_specs(), stage,
        flat_layout_of(engine_->param_specs(), comm_->world_size()), comm_->rank(), dev_);
    LJ_RETURN_IF_ERROR(agreed(resumed.status()).with_context("resuming from " + step_dir));
    if (resumed->state.fingerprint != state_.fingerprint) {
      return another_run(c_.out_dir, resumed->state.fingerprint, state_.fingerprint,
                         "use a new --out folder, or the same model and global batch (micro-batch "
                         "x accumulation x ranks)");
    }
    state_ = resumed->state;
    LJ_RETURN_IF_ERROR(restore(*engine_, *resumed));
    summary_.resumed = true;
    summary_.resumed_from = state_.step;
    info("resumed from " + step_dir + " (step " + std::to_string(state_.step) + ", written by " +
         std::to_string(resumed->saved_world_size) + " rank(s) at ZeRO stage " +
         std::to_string(resumed->saved_zero_stage) + ")");
    return ok_status();
  }

  // This rank's micro-batches of the next step: one process reads on; a rank reads its own
  // windows of the global step (dist/batch_shard.h).
  std::vector<MicroBatch> next_micro_batches() {
    std::vector<MicroBatch> micro(static_cast<size_t>(c_.grad_accum));
    if (comm_ == nullptr) {
      for (auto& mb : micro) loader_->next(dev_, &mb.tokens, &mb.targets);
      return micro;
    }
    for (size_t j = 0; j < micro.size(); ++j) {
      loader_->set_position(state_.data_position + my_micro_batches_[j] * c_.batch_size);
      loader_->next(dev_, &micro[j].tokens, &micro[j].targets);
    }
    return micro;
  }

  // The step into the state: its count, the skipped ones, the data position.
  void count_step(const StepResult& r) {
    if (r.updated) {
      bad_in_a_row_ = 0;
      ++state_.optimizer_steps;
    } else {
      ++state_.skipped_steps;
      // An fp16 overflow is the loss scaler's business (it lowers the scale, and fails at the
      // minimum); only other non-finite steps count towards max_bad_steps.
      if (!r.overflow) ++bad_in_a_row_;
    }
    ++state_.step;
    ++summary_.steps_run;
    state_.data_position = comm_ == nullptr
                               ? loader_->position()
                               : state_.data_position + world_ * c_.grad_accum * c_.batch_size;
  }

  void report_step(const StepResult& r, double lr, double dt) {
    if (!cb_.on_step) return;
    StepMetrics m{state_.step, r.loss,
                  r.grad_norm, lr,
                  dt,          c_.batch_size * c_.seq_len * c_.grad_accum,
                  !r.updated,  state_.skipped_steps};
    m.device_memory_peak = engine_->device_memory_peak();
    if (c_.step.loss_scale.enabled) {
      m.loss_scale = r.loss_scale;
      m.overflow = r.overflow;
      m.overflow_total = engine_->loss_scaler().state().overflows;
      m.next_loss_scale = engine_->loss_scaler().scale();
    }
    cb_.on_step(m);
  }

  Status check_bad_steps() const {
    if (bad_in_a_row_ < c_.max_bad_steps) return ok_status();
    return internal_error(
        "loss or gradient was not finite for " + std::to_string(bad_in_a_row_) +
            " steps in a row (last at step " + std::to_string(state_.step) + ")",
        "lower --lr, check the data, or resume from the last checkpoint in " + c_.out_dir);
  }

  // A checkpoint of the state now: sharded with several ranks, one process's otherwise.
  Status save() {
    const double t0 = now_seconds();
    if (c_.step.loss_scale.enabled) state_.loss_scale = engine_->loss_scaler().state();
    // ZeRO-3: the whole parameters for the checkpoint's weights (freed after).
    LJ_RETURN_IF_ERROR(engine_->pull_state());
    Status saved;
    if (comm_ != nullptr) {
      const ShardedCheckpoint ck{state_, c_.step.data_parallel.zero.stage, &engine_->host_params(),
                                 &engine_->host_m(), &engine_->host_v()};
      saved = save_sharded_checkpoint(*comm_, c_.out_dir, model_, engine_->param_specs(), ck,
                                      c_.keep_last);
    } else {
      const Checkpoint ck{state_, engine_->host_params(), engine_->host_m(), engine_->host_v()};
      saved = save_checkpoint(c_.out_dir, model_, engine_->param_specs(), ck, c_.keep_last);
    }
    LJ_RETURN_IF_ERROR(engine_->push_state(/*changed=*/false));
    LJ_RETURN_IF_ERROR(saved);
    info("checkpoint " + c_.out_dir + "/step-" + std::to_string(state_.step) + " (" +
         format_seconds(now_seconds() - t0) + ")");
    return ok_status();
  }

  // The mean loss on the validation data, to on_eval.
  Status evaluate() {
    if (val_data_ == nullptr) return ok_status();
    EvalOptions o;
    o.batch_size = c_.batch_size;
    o.seq_len = c_.seq_len;
    o.max_batches = c_.val_batches;
    o.autocast = c_.step.graph.autocast;  // the run's precision (bf16: casts as in training)
    auto evaluated = engine_->evaluate(*val_data_, o);
    LJ_RETURN_IF_ERROR(agreed(evaluated.status()));
    const EvalResult& r = *evaluated;
    if (cb_.on_eval) cb_.on_eval(EvalMetrics{state_.step, r.loss, r.perplexity});
    return ok_status();
  }

  const LlamaConfig& model_;
  const TokenFile* val_data_;
  const TrainerConfig& c_;
  Device& dev_;
  const TrainerCallbacks& cb_;
  Communicator* comm_;
  int world_ = 1;
  std::vector<int64_t> my_micro_batches_;
  std::optional<DataLoader> loader_;
  std::unique_ptr<StepEngine> engine_;
  TrainerState state_;
  TrainSummary summary_;
  int64_t bad_in_a_row_ = 0;
};

}  // namespace

StatusOr<TrainSummary> run_training(const LlamaConfig& model, const std::vector<Tensor>* initial,
                                    const TokenFile& train_data, const TokenFile* val_data,
                                    const TrainerConfig& c, Device& dev,
                                    const std::atomic<bool>* stop, const TrainerCallbacks& cb) {
  // Several ranks: the same run everywhere, checked before anything can fail on one rank alone.
  if (Communicator* comm = c.step.data_parallel.comm; comm != nullptr) {
    LJ_RETURN_IF_ERROR(
        check_same_on_all_ranks(*comm, training_fingerprint(model, c, train_data, val_data)));
  }
  LJ_RETURN_IF_ERROR(check_settings(model, c));
  TrainingRun run(model, val_data, c, dev, cb);
  LJ_RETURN_IF_ERROR(run.open(train_data));
  LJ_RETURN_IF_ERROR(run.load_initial(initial));
  LJ_RETURN_IF_ERROR(run.resume());
  LJ_RETURN_IF_ERROR(run.start());
  while (!run.done() && !run.stop_requested(stop)) LJ_RETURN_IF_ERROR(run.step());
  return run.finish();
}

}  // namespace lj
