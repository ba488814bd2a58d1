// The compiler driver: which passes turn a forward graph (a model with a scalar loss) into the
// joint training graph, and in which order (docs/architecture.md, "The pipeline"):
//
//   [pattern fusion] -> [autocast] ->  autodiff  -> [master_weights] -> [cse] -> remat ->
//    compile only       bf16 only      + "grad:"     bf16 only           compile only
//                                      outputs
//   [dce -> pointwise fusion -> dce -> schedule]
//    compile only
//   -> [grad_sync]  several processes only: the gradient collectives (passes/collectives)
//
// The order is not only written here: every pass list the driver assembles is checked against
// kPassOrderRules (check_pass_order) before anything runs, and a list that breaks a rule is a
// broken invariant (LJ_CHECK). Knows no model: the Llama joint graph is build_train_graph
// (train_graph.h), which calls this driver.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "graph/ir.h"
#include "passes/collectives/grad_sync.h"
#include "passes/pass.h"
#include "passes/remat/remat.h"

namespace lj {

struct PipelineOptions {
  // Pattern fusion before autodiff; simplify, cse, pointwise fusion and the schedule after it.
  bool compile = false;
  RecomputeConfig recompute;  // passes/remat; policy none: no remat pass
  int64_t num_layers = 0;     // the model's layers (what remat's regions index)
  // bf16 (or f16): mixed precision, the autocast pass (passes/autocast) before autodiff. f32: off.
  DType autocast = DType::f32;
  // With autocast: persistent 16-bit weight copies fed as inputs and weight-gradient casts
  // folded into their GEMMs (passes/master_weights) instead of two casts per parameter a step.
  // Never at ZeRO stage 3 (the graph gathers the f32 parameters).
  bool low_weight_copies = true;
  // Data parallelism: the gradient collectives, placed last (passes/collectives/grad_sync.h).
  GradSyncOptions grad_sync;
};

// In a pass sequence, where autodiff (append_gradients) runs: not a Pass, but passes are ordered
// against it.
inline constexpr std::string_view kAutodiffStep = "autodiff";

// One ordering rule: when both are scheduled, `before` runs before `after`. "*" as `after` means
// `before` runs after everything else (it is last), except the pass named `except`, which may
// follow it.
struct PassOrderRule {
  std::string_view before;
  std::string_view after;
  std::string_view why;
  std::string_view except = {};
};
inline constexpr PassOrderRule kPassOrderRules[] = {
    {"rms_norm_fusion", kAutodiffStep, "a fused op brings its own fused VJP"},
    {"swiglu_fusion", kAutodiffStep, "a fused op brings its own fused VJP"},
    {"rope_fusion", kAutodiffStep, "a fused op brings its own fused VJP"},
    {"linear_cross_entropy_fusion", kAutodiffStep, "a fused op brings its own fused VJP"},
    {"matmul_add_fusion", kAutodiffStep, "a fused op brings its own fused VJP"},
    {"rms_norm_fusion", "autocast", "fusion patterns are written over primitives of one dtype"},
    {"swiglu_fusion", "autocast", "fusion patterns are written over primitives of one dtype"},
    {"rope_fusion", "autocast", "fusion patterns are written over primitives of one dtype"},
    {"linear_cross_entropy_fusion", "autocast",
     "fusion patterns are written over primitives of one dtype"},
    {"matmul_add_fusion", "autocast", "fusion patterns are written over primitives of one dtype"},
    {"autocast", kAutodiffStep, "the backward gets the casts' VJPs (gradients cast back to f32)"},
    {kAutodiffStep, "remat", "remat rewires the backward's readers"},
    {kAutodiffStep, "master_weights", "the weight casts' VJPs must be in the graph first"},
    {"master_weights", "cse", "cse would see the casts it removes"},
    {"master_weights", "remat", "recomputed layers read the copies instead of recasting"},
    {"master_weights", "pointwise_fusion", "a folded cast is no fusion member"},
    {kAutodiffStep, "pointwise_fusion", "fused_pointwise is not differentiable"},
    {"cse", "remat", "cse would merge remat's deliberate copies back (passes/cse/cse.h)"},
    {kAutodiffStep, "simplify", "its rule's targets are the VJPs autodiff writes"},
    {"cse", "pointwise_fusion", "shared subexpressions are shared before fusion copies them"},
    {"remat", "pointwise_fusion", "fusion groups the recomputed copies too"},
    {"schedule", "*", "kernels are bound to node positions; the memory plan follows the schedule",
     "grad_sync"},
    {"grad_sync", "*",
     "a bucket's reduction starts after the node that makes its last gradient, by position"},
};

// Checks a sequence of pass names (with kAutodiffStep where autodiff runs) against `rules`: an
// invalid_argument naming the broken rule and why, else ok.
Status check_pass_order(std::span<const std::string> names,
                        std::span<const PassOrderRule> rules = kPassOrderRules);

// The passes the driver runs for `options`, in order, with kAutodiffStep between the two stages.
std::vector<std::string> pipeline_pass_names(const PipelineOptions& options);

// Runs the pipeline on the forward graph `g`: the passes before autodiff, the gradients of `loss`
// for `params` appended as graph outputs "grad:<param_names[i]>" (in order), verify, the passes
// after autodiff. `loss` and `params` must survive the passes before autodiff (pattern fusion
// keeps them). The passes that ran (in order, with timings) go to `report` when given.
Status run_train_pipeline(Graph* g, ValueId loss, const std::vector<ValueId>& params,
                          const std::vector<std::string>& param_names,
                          const PipelineOptions& options, PassReport* report = nullptr);

}  // namespace lj
