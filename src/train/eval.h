// Evaluation: mean next-token loss and perplexity of a model on a token file, over
// non-overlapping windows of T+1 tokens (T inputs, the next T as targets), B windows a batch.
#pragma once

#include <functional>

#include "io/tokens.h"
#include "train/hf_model.h"

namespace lj {

struct EvalOptions {
  int64_t batch_size = 4;
  int64_t seq_len = 256;
  int64_t max_batches = 0;  // 0: the whole file
  // Called with (0, batches total) before the first batch, then after each with (batches done,
  // batches total).
  std::function<void(int64_t, int64_t)> progress;
  // bf16 (or f16): the forward runs in mixed precision, the casts placed by passes/autocast as
  // in training (f32 weights cast at their point of use, f32 loss); f32: off. The logits handed
  // back are f32 either way.
  DType autocast = DType::f32;
  // When set, receives the logits (B, T, V) of the first batch.
  Tensor* first_logits = nullptr;
};

struct EvalResult {
  double loss = 0;  // mean over every predicted token
  double perplexity = 0;
  int64_t tokens = 0;  // predicted tokens
  int64_t batches = 0;
};

StatusOr<EvalResult> evaluate(const HfModel& model, const TokenFile& data,
                              const EvalOptions& options, Device& dev);

// The forward graph evaluate() runs (models/llama.h's, f32), with passes/autocast's casts when
// `autocast` is 16-bit; outputs the loss, and the logits when `output_logits`.
Status build_eval_graph(const LlamaConfig& config, DType autocast, bool output_logits, Graph* g);

// The loop of evaluate() over `data`'s batches for a model of `vocab_size`, whatever computes a
// batch's mean loss: `batch_loss(tokens, targets, logits)` with host (B, T) i32 tensors; it
// writes the batch's logits into `logits` when that is not null (the first batch, when
// options.first_logits is set). The GPU's evaluation (train/gpu_train.h) runs it too.
using BatchLoss =
    std::function<StatusOr<double>(const Tensor& tokens, const Tensor& targets, Tensor* logits)>;
StatusOr<EvalResult> evaluate_batches(const TokenFile& data, int64_t vocab_size,
                                      const EvalOptions& options, Device& dev,
                                      const BatchLoss& batch_loss);

}  // namespace lj
