#include "train/eval.h"

#include <cmath>

#include "passes/autocast/autocast.h"
#include "runtime/executor.h"
#include "train/data_loader.h"
#include "train/train_step.h"

namespace lj {

StatusOr<EvalResult> evaluate(const HfModel& model, const TokenFile& data, const EvalOptions& o,
                              Device& dev) {
  const int64_t B = o.batch_size, T = o.seq_len;
  if (B <= 0 || T <= 0) return invalid_argument("--batch-size and --seq-len must be positive");
  LJ_ASSIGN_OR_RETURN(DataLoader loader, DataLoader::create(data, B, T, model.config.vocab_size));
  Graph g;
  LJ_RETURN_IF_ERROR(build_llama(model.config, &g, DType::f32, o.first_logits != nullptr).status());
  if (o.autocast != DType::f32) {
    PassManager pm;
    pm.add(make_autocast_pass(o.autocast));
    LJ_RETURN_IF_ERROR(pm.run(g).status());
  }
  Executor ex(g, dev);
  Tensor cos, sin;
  LJ_RETURN_IF_ERROR(make_rope_inputs(dev, model.config, T, &cos, &sin));
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
