#include "passes/pipeline/pipeline.h"

#include <algorithm>

#include "core/check.h"
#include "graph/autodiff/autodiff.h"
#include "passes/autocast/autocast.h"
#include "passes/cse/cse.h"
#include "passes/dce/dce.h"
#include "passes/master_weights/master_weights.h"
#include "passes/pattern_fusion/pattern_fusion.h"
#include "passes/pattern_fusion/pattern_fusion_ce.h"
#include "passes/pointwise_fusion/pointwise_fusion.h"
#include "passes/schedule/schedule.h"
#include "passes/simplify/simplify.h"

namespace lj {
namespace {

// The two stages of the pipeline, as pass managers (nothing run yet).
struct Stages {
  PassManager before_autodiff, after_autodiff;
  std::vector<std::string> names() const {
    std::vector<std::string> n = before_autodiff.names();
    n.emplace_back(kAutodiffStep);
    for (std::string& s : after_autodiff.names()) n.push_back(std::move(s));
    return n;
  }
};

// Assembles the pass lists for `options` and checks their order (an invariant of this file).
Stages assemble(const PipelineOptions& options) {
  Stages st;
  const bool remat = options.recompute.policy != RecomputePolicy::none;
  if (options.compile) {
    // Norms, SwiGLU, RoPE first: a residual add feeding a norm joins it (add_rms_norm); the
    // adds left over become GEMM epilogues (matmul_add).
    add_pattern_fusion_passes(st.before_autodiff, remat);
    st.before_autodiff.add(make_linear_cross_entropy_fusion());
    st.before_autodiff.add(make_matmul_add_fusion());
  }
  if (options.autocast != DType::f32) st.before_autodiff.add(make_autocast_pass(options.autocast));
  // After autodiff: recompute, then (compile only) pointwise fusion and the schedule.
  PassManager& pm = st.after_autodiff;
  if (options.autocast != DType::f32 && options.low_weight_copies &&
      !(options.grad_sync.enabled() && options.grad_sync.zero.shards(ZeroSharded::parameters))) {
    pm.add(std::make_unique<MasterWeightsPass>());
  }
  if (options.compile) {
    pm.add(std::make_unique<SimplifyPass>());
    pm.add(std::make_unique<CsePass>());
  }
  if (remat) pm.add(std::make_unique<RematPass>(options.recompute, options.num_layers));
  if (options.compile) {
    pm.add(std::make_unique<DcePass>());
    pm.add(std::make_unique<PointwiseFusionPass>());
    pm.add(std::make_unique<DcePass>());  // constants and expands the groups inlined
    pm.add(std::make_unique<SchedulePass>());
  }
  if (options.grad_sync.enabled()) pm.add(std::make_unique<GradSyncPass>(options.grad_sync));
  const Status order = check_pass_order(st.names());
  LJ_CHECK(order.ok()) << "the compiler pipeline's pass order: " << order.to_string();
  return st;
}

}  // namespace

Status check_pass_order(std::span<const std::string> names, std::span<const PassOrderRule> rules) {
  auto positions = [&](std::string_view name) {
    std::vector<size_t> at;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) at.push_back(i);
    }
    return at;
  };
  for (const PassOrderRule& r : rules) {
    const std::vector<size_t> before = positions(r.before);
    if (before.empty()) continue;
    if (r.after == "*") {
      bool last = before.size() == 1;
      for (size_t i = before.front() + 1; last && i < names.size(); ++i) {
        last = !r.except.empty() && names[i] == r.except;
      }
      if (!last) {
        return invalid_argument(std::string(r.before) +
                                " must run last, once: " + std::string(r.why));
      }
      continue;
    }
    const std::vector<size_t> after = positions(r.after);
    if (after.empty()) continue;
    if (before.back() > after.front()) {
      return invalid_argument(std::string(r.before) + " must not run after " +
                              std::string(r.after) + ": " + std::string(r.why));
    }
  }
  return ok_status();
}

std::vector<std::string> pipeline_pass_names(const PipelineOptions& options) {
  return assemble(options).names();
}

Status run_train_pipeline(Graph* g, ValueId loss, const std::vector<ValueId>& params,
                          const std::vector<std::string>& param_names,
                          const PipelineOptions& options, PassReport* report) {
  LJ_CHECK_EQ(params.size(), param_names.size());
  Stages st = assemble(options);
  LJ_ASSIGN_OR_RETURN(PassReport pre, st.before_autodiff.run(*g));
  LJ_ASSIGN_OR_RETURN(auto grads, append_gradients(g, loss, params));
  for (size_t i = 0; i < grads.size(); ++i) g->add_output("grad:" + param_names[i], grads[i]);
  LJ_RETURN_IF_ERROR(verify(*g));
  LJ_ASSIGN_OR_RETURN(PassReport post, st.after_autodiff.run(*g));
  if (report) {
    report->runs = pre.runs;
    report->runs.insert(report->runs.end(), post.runs.begin(), post.runs.end());
  }
  return ok_status();
}

}  // namespace lj
