#include "train/eval.h"

#include <cmath>

#include "passes/autocast/autocast.h"
#include "runtime/executor.h"
#include "train/data_loader.h"
#include "train/train_step.h"

namespace lj {

StatusOr<EvalResult> evaluate_batches(const TokenFile& data, int64_t vocab_size,
                                      const EvalOptions& o, Device& dev,
                                      const BatchLoss& batch_loss) {
  const int64_t B = o.batch_size, T = o.seq_len;
  if (B <= 0 || T <= 0) return invalid_argument("--batch-size and --seq-len must be positive");
  LJ_ASSIGN_OR_RETURN(DataLoader loader, DataLoader::create(data, B, T, vocab_size));
  int64_t batches = loader.windows() / B;
  if (o.max_batches > 0) batches = std::min(batches, o.max_batches);
  EvalResult r;
  double total = 0;
  // Report the start too: the rate (and so the ETA) is measured from here, not from before the
  // model and graph were built.
  if (o.progress) o.progress(0, batches);
  for (int64_t k = 0; k < batches; ++k) {
    Tensor tokens, targets;
    loader.next(dev, &tokens, &targets);
    LJ_ASSIGN_OR_RETURN(const double loss,
                        batch_loss(tokens, targets, k == 0 ? o.first_logits : nullptr));
    total += loss * static_cast<double>(B * T);  // every target counts: none is ignored
    r.tokens += B * T;
    ++r.batches;
    if (o.progress) o.progress(k + 1, batches);
  }
  r.loss = total / static_cast<double>(r.tokens);
  r.perplexity = std::exp(r.loss);
  return r;
}

Status build_eval_graph(const LlamaConfig& config, DType autocast, bool output_logits, Graph* g) {
  LJ_RETURN_IF_ERROR(build_llama(config, g, DType::f32, output_logits).status());
  if (autocast == DType::f32) return ok_status();
  PassManager pm;
  pm.add(make_autocast_pass(autocast));
  return pm.run(*g).status();
}

StatusOr<EvalResult> evaluate(const HfModel& model, const TokenFile& data, const EvalOptions& o,
                              Device& dev) {
  if (o.batch_size <= 0 || o.seq_len <= 0)
    return invalid_argument("--batch-size and --seq-len must be positive");
  Graph g;
  LJ_RETURN_IF_ERROR(build_eval_graph(model.config, o.autocast, o.first_logits != nullptr, &g));
  Executor ex(g, dev);
  Tensor cos, sin;
  LJ_RETURN_IF_ERROR(make_rope_inputs(dev, model.config, o.seq_len, &cos, &sin));
  return evaluate_batches(
      data, model.config.vocab_size, o, dev,
      [&](const Tensor& tokens, const Tensor& targets, Tensor* logits) -> StatusOr<double> {
        std::vector<Tensor> inputs{tokens, targets, cos, sin};
        inputs.insert(inputs.end(), model.params.begin(), model.params.end());
        LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ex.run(inputs));
        if (logits != nullptr) *logits = outs[1];
        return outs[0].at(0);
      });
}

}  // namespace lj
