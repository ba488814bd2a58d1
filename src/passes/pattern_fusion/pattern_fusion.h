// Pattern fusion: finds the primitive subgraphs models/llama.cc writes the way HF's
// modeling_llama.py does and replaces each with one fused op of graph/ops.def's last block:
//
//   rms_norm_fusion  x * rsqrt(mean(square(x), -1, keepdim) + eps) * w  -> rms_norm(x, w)
//                    and, when x = a + b, the residual add too         -> add_rms_norm(a, b, w)
//   swiglu_fusion    silu(gate) * up                                     -> swiglu(gate, up)
//   rope_fusion      x * cos + cat(-x[..., D/2:], x[..., :D/2]) * sin    -> rope(x, cos, sin)
//
// Multiplications and additions match with their operands in either order. A subgraph is fused
// only when it is exact (rewrite.h): attributes, shapes and constants check, and no intermediate
// value is read outside it; otherwise it is left as it is. Fused nodes take the scope and phase
// of the subgraph's last node (an add_rms_norm gets the norm's scope, the residual add moving into
// it, across a layer boundary only when nothing is recomputed) and take over its value ids, so
// nothing downstream changes and no dead nodes remain.
//
// Before: nothing. Run on the forward graph, before autodiff (train/train_step.cc's
// build_train_graph does, when compiling): each fused op brings its own fused VJP
// (graph/autodiff/fused_vjp.cc), which the primitives' VJPs would otherwise spell out in many
// small ops. After: autodiff; the rules leave nothing for dce to do.
#pragma once

#include "passes/pass.h"

namespace lj {

class RmsNormFusion : public Pass {
 public:
  // add_across_layers: also fuse a residual add made in another layer (the previous layer's
  // output into this layer's input_layernorm, the last layer's into model.norm). That moves the
  // add into the norm's layer, so a recomputed layer would keep the add's two inputs instead of
  // its one input: passes/remat's regions are layers by scope. Off when anything is recomputed.
  explicit RmsNormFusion(bool add_across_layers = true) : across_layers_(add_across_layers) {}
  const char* name() const override { return "rms_norm_fusion"; }
  StatusOr<bool> run(Graph& g) override;
  // Fusions made by the last run.
  int rms_norm_count() const { return rms_norm_; }
  int add_rms_norm_count() const { return add_rms_norm_; }

 private:
  bool across_layers_;
  int rms_norm_ = 0, add_rms_norm_ = 0;
};

class SwigluFusion : public Pass {
 public:
  const char* name() const override { return "swiglu_fusion"; }
  StatusOr<bool> run(Graph& g) override;
  int count() const { return count_; }  // fusions made by the last run

 private:
  int count_ = 0;
};

class RopeFusion : public Pass {
 public:
  const char* name() const override { return "rope_fusion"; }
  StatusOr<bool> run(Graph& g) override;
  int count() const { return count_; }  // fusions made by the last run

 private:
  int count_ = 0;
};

// Adds every rule, in the order compile uses (rope, swiglu, rms_norm: independent patterns, so the
// order changes nothing but the dump file names). recompute: whether any layer will be recomputed
// (then residual adds are fused only within a layer; see RmsNormFusion).
void add_pattern_fusion_passes(PassManager& pm, bool recompute = false);

}  // namespace lj
