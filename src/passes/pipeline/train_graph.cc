#include "passes/pipeline/train_graph.h"

#include <atomic>

#include "graph/builder.h"
#include "passes/pipeline/pipeline.h"

namespace lj {
namespace {
std::atomic<int64_t> g_train_graphs_built{0};
}  // namespace

int64_t train_graphs_built() {
  return g_train_graphs_built.load();
}

StatusOr<LlamaGraph> build_train_graph(const LlamaConfig& model, const GraphOptions& options,
                                       Graph* g, PassReport* report) {
  LJ_RETURN_IF_ERROR(options.recompute.validate(model.num_hidden_layers));
  ++g_train_graphs_built;
  LJ_ASSIGN_OR_RETURN(LlamaGraph ids, build_llama(model, g, options.dtype, options.output_logits,
                                                  options.layer_callback, options.experts));
  std::vector<std::string> names;
  for (const ParamSpec& s : llama_param_specs(model, options.experts)) names.push_back(s.name);
  PipelineOptions p;
  p.compile = options.compile;
  p.recompute = options.recompute;
  p.num_layers = model.num_hidden_layers;
  p.autocast = options.autocast;
  p.low_weight_copies = options.low_weight_copies;
  p.grad_sync = options.grad_sync;
  // Sharded experts are reduced over their own group (train/expert_params.h), not the world's.
  p.grad_sync.skip_experts = options.experts.size > 1;
  ValueId loss = ids.loss;
  if (options.loss_scaling) {
    Builder b(g);
    b.set_scope("loss_scale");
    const Val scale = b.state("loss_scale", DType::f32, Shape{});
    const Val scaled = mul(b.val(ids.loss), scale);
    LJ_RETURN_IF_ERROR(b.status());
    loss = scaled.id;
  }
  LJ_RETURN_IF_ERROR(run_train_pipeline(g, loss, ids.params, names, p, report));
  return ids;
}

}  // namespace lj
