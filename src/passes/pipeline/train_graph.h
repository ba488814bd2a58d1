// The Llama joint graph of one training step: the forward graph (models/ build_llama) run
// through the compiler pipeline (pipeline.h). The one place that knows both the model and the
// compiler: train/ (TrainStep) runs this graph and plan/ dry-runs it, and plan/ never reaches
// into train/ for it (docs/architecture.md's module table).
#pragma once

#include "core/dtype.h"
#include "graph/ir.h"
#include "models/llama.h"
#include "passes/collectives/grad_sync.h"
#include "passes/pass.h"
#include "passes/remat/remat.h"

namespace lj {

// How the joint graph is built: which compile passes run and what is recomputed.
struct GraphOptions {
  bool output_logits = false;
  // --compile / LJ_COMPILE=1: pattern fusion before autodiff, pointwise fusion + codegen after,
  // and the static memory plan. Off: the eager path (primitive ops, caching allocator).
  bool compile = false;
  RecomputeConfig recompute;     // passes/remat
  LayerCallback layer_callback;  // a host callback inside the model (a graph break)
  // Compute dtype of the graph (parameters, activations). The CPU trains in f32; plan/ builds
  // bf16 graphs for GPU predictions (dry runs only).
  DType dtype = DType::f32;
  // Mixed precision: bf16 runs the autocast pass (passes/autocast) on the f32 graph: f32
  // parameters (master weights) cast to bf16 at their point of use, bf16 activations, f32
  // losses, reductions and gradients. f32: off. Needs dtype f32.
  DType autocast = DType::f32;
  // With autocast: 16-bit weight copies as graph inputs "low:<name>" (written by the optimizer)
  // and f32 weight gradients straight out of their GEMMs (passes/master_weights); false: a cast
  // of every parameter at its point of use and of every gradient, each step. Off at ZeRO-3.
  bool low_weight_copies = true;
  // fp16 loss scaling (train/loss_scaler.h): a scalar f32 input "loss_scale" (Role::state, after
  // the parameters) multiplies the loss before autodiff, so every gradient comes out scaled by
  // it; the "loss" output stays unscaled.
  bool loss_scaling = false;
  // Several processes: the gradient collectives in the graph (passes/collectives/grad_sync.h);
  // stage -1 (the default): one process, none.
  GradSyncOptions grad_sync;
  // Expert parallelism (--expert-parallel N): the sparse layers exchange their routed rows with
  // the group's other ranks and run this rank's experts (models/moe.h). Size 1: none.
  ExpertShard experts;
};

// The joint graph of one training step: the forward graph (build_llama) and the gradient of
// the loss for every parameter. Outputs: "loss", ["logits"], then "grad:<name>" in
// llama_param_specs order.
// The passes that ran (in order, with timings) go to `report` when given.
StatusOr<LlamaGraph> build_train_graph(const LlamaConfig& model, const GraphOptions& options,
                                       Graph* g, PassReport* report = nullptr);

// A joint graph built once (build_train_graph with `options`), to be dry-run and then run by
// TrainStep::create without building it again.
struct TrainGraph {
  GraphOptions options;
  Graph graph;
  LlamaGraph ids;
  PassReport passes;  // the passes that ran
};

// How many joint graphs build_train_graph has built in this process (a test counter: a
// benchmark-style flow builds the chosen configuration's graph once).
int64_t train_graphs_built();

}  // namespace lj
