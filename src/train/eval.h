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

}  // namespace lj
