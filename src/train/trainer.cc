#include "train/trainer.h"

#include <cmath>
#include <cstring>

#include "core/units.h"
#include "train/data_loader.h"
#include "train/eval.h"

namespace lj {
namespace {

// What must match for a checkpoint to be resumed by this run.
std::string fingerprint(const LlamaConfig& m, const TrainerConfig& c) {
  return "L" + std::to_string(m.num_hidden_layers) + " C" + std::to_string(m.hidden_size) + " F" +
         std::to_string(m.intermediate_size) + " H" + std::to_string(m.num_attention_heads) + " G" +
         std::to_string(m.num_key_value_heads) + " D" + std::to_string(m.head_dim) + " V" +
         std::to_string(m.vocab_size) + " B" + std::to_string(c.batch_size) + " T" +
         std::to_string(c.seq_len) + " A" + std::to_string(c.grad_accum);
}

void copy_into(std::vector<Tensor>& dst, const std::vector<Tensor>& src) {
  for (size_t i = 0; i < dst.size(); ++i) std::memcpy(dst[i].raw(), src[i].raw(), dst[i].bytes());
}

}  // namespace

StatusOr<TrainSummary> run_training(const LlamaConfig& model, const std::vector<Tensor>* initial,
                                    const TokenFile& train_data, const TokenFile* val_data,
                                    const TrainerConfig& c, Device& dev,
                                    const std::atomic<bool>* stop, const TrainerCallbacks& cb) {
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
  LJ_ASSIGN_OR_RETURN(DataLoader loader,
                      DataLoader::create(train_data, c.batch_size, c.seq_len, model.vocab_size));
  LJ_ASSIGN_OR_RETURN(auto trainer, TrainStep::create(model, c.step, dev));
  if (c.step.graph.compile) info("compile: on\n" + trainer->compile_log());
  if (initial != nullptr) copy_into(trainer->params(), *initial);

  TrainerState state;
  state.seed = c.step.seed;
  state.fingerprint = fingerprint(model, c);
  TrainSummary summary;
  auto resumed = load_latest_checkpoint(c.out_dir, trainer->param_specs(), dev);
  if (resumed.ok()) {
    if (resumed->state.fingerprint != state.fingerprint) {
      return invalid_argument("the checkpoint in " + c.out_dir + " is from another run (" +
                                  resumed->state.fingerprint + "; this run is " +
                                  state.fingerprint + ")",
                              "use a new --out folder, or the same model and batch settings");
    }
    state = resumed->state;
    copy_into(trainer->params(), resumed->params);
    copy_into(trainer->optimizer().m(), resumed->m);
    copy_into(trainer->optimizer().v(), resumed->v);
    trainer->optimizer().set_steps(state.optimizer_steps);
    loader.set_position(state.data_position);
    summary.resumed = true;
    summary.resumed_from = state.step;
    info("resumed from " + latest_checkpoint_dir(c.out_dir) + " (step " +
         std::to_string(state.step) + ")");
  } else if (resumed.status().code() != StatusCode::not_found) {
    return resumed.status().with_context("resuming from " + c.out_dir);
  }

  auto save = [&]() -> Status {
    Checkpoint ck{state, trainer->params(), trainer->optimizer().m(), trainer->optimizer().v()};
    const double t0 = now_seconds();
    LJ_RETURN_IF_ERROR(save_checkpoint(c.out_dir, model, trainer->param_specs(), ck, c.keep_last));
    info("checkpoint " + c.out_dir + "/step-" + std::to_string(state.step) + " (" +
         format_seconds(now_seconds() - t0) + ")");
    return ok_status();
  };
  auto evaluate_now = [&]() -> Status {
    if (val_data == nullptr) return ok_status();
    HfModel view{model, trainer->param_specs(), trainer->params()};
    EvalOptions o;
    o.batch_size = c.batch_size;
    o.seq_len = c.seq_len;
    o.max_batches = c.val_batches;
    LJ_ASSIGN_OR_RETURN(EvalResult r, evaluate(view, *val_data, o, dev));
    if (cb.on_eval) cb.on_eval(EvalMetrics{state.step, r.loss, r.perplexity});
    return ok_status();
  };

  if (summary.resumed) LJ_RETURN_IF_ERROR(prune_checkpoints(c.out_dir, c.keep_last));
  if (cb.on_start) LJ_RETURN_IF_ERROR(cb.on_start());
  int64_t bad_in_a_row = 0;
  while (state.step < c.steps) {
    if (stop != nullptr && stop->load()) {
      summary.stopped_by_signal = true;
      break;
    }
    const double lr = c.lr_fn ? c.lr_fn(state.step) : c.lr.at(state.step);
    const double t0 = now_seconds();
    std::vector<TrainStep::Batch> micro(static_cast<size_t>(c.grad_accum));
    for (auto& mb : micro) loader.next(dev, &mb.tokens, &mb.targets);
    LJ_ASSIGN_OR_RETURN(StepResult r, trainer->step(micro, lr));
    const double dt = now_seconds() - t0;
    if (r.updated) {
      bad_in_a_row = 0;
      ++state.optimizer_steps;
    } else {
      ++state.skipped_steps;
      ++bad_in_a_row;
    }
    ++state.step;
    ++summary.steps_run;
    state.data_position = loader.position();
    if (cb.on_step) {
      cb.on_step(StepMetrics{state.step, r.loss, r.grad_norm, lr, dt,
                             c.batch_size * c.seq_len * c.grad_accum, !r.updated,
                             state.skipped_steps});
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
  return summary;
}

}  // namespace lj
