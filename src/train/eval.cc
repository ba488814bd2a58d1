#include "train/eval.h"

#include <cmath>

#include "runtime/executor.h"
#include "train/train_step.h"

namespace lj {

StatusOr<EvalResult> evaluate(const HfModel& model, const TokenFile& data, const EvalOptions& o, Device& dev) {
  const int64_t B = o.batch_size, T = o.seq_len;
  if (B <= 0 || T <= 0) return invalid_argument("--batch-size and --seq-len must be positive");
  const int64_t windows = (data.size() - 1) / T;
  if (windows < B) {
    return invalid_argument(data.path() + " holds " + std::to_string(data.size()) + " tokens, fewer than one batch of " +
                                std::to_string(B) + " x " + std::to_string(T) + " + 1",
                            "use a smaller --batch-size or --seq-len");
  }
  const uint32_t max_id = data.max_token();
  if (max_id >= static_cast<uint32_t>(model.config.vocab_size)) {
    return invalid_argument(data.path() + " holds token id " + std::to_string(max_id) + ", outside the model's vocabulary of " +
                                std::to_string(model.config.vocab_size),
                            "was the data tokenized for this model? check --data-format");
  }
  Graph g;
  LJ_RETURN_IF_ERROR(build_llama(model.config, &g, DType::f32, o.first_logits != nullptr).status());
  Executor ex(g, dev);
  Tensor cos, sin;
  LJ_RETURN_IF_ERROR(make_rope_inputs(dev, model.config, T, &cos, &sin));
  int64_t batches = windows / B;
  if (o.max_batches > 0) batches = std::min(batches, o.max_batches);

  EvalResult r;
  double total = 0;
  for (int64_t k = 0; k < batches; ++k) {
    Tensor tokens = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
    Tensor targets = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = (k * B + b) * T;
      for (int64_t t = 0; t < T; ++t) {
        tokens.data<int32_t>()[b * T + t] = static_cast<int32_t>(data[start + t]);
        targets.data<int32_t>()[b * T + t] = static_cast<int32_t>(data[start + t + 1]);
      }
    }
    std::vector<Tensor> inputs{tokens, targets, cos, sin};
    inputs.insert(inputs.end(), model.params.begin(), model.params.end());
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ex.run(inputs));
    total += outs[0].at(0) * static_cast<double>(B * T);  // every target counts: none is ignored
    if (k == 0 && o.first_logits != nullptr) *o.first_logits = outs[1];
    r.tokens += B * T;
    ++r.batches;
    if (o.progress) o.progress(k + 1, batches);
  }
  r.loss = total / static_cast<double>(r.tokens);
  r.perplexity = std::exp(r.loss);
  return r;
}

}  // namespace lj
