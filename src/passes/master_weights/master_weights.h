// Master weights under mixed precision (passes/autocast): the two per-step casts of every
// parameter, taken out of the step.
//
// autocast casts each f32 parameter (the master weight) to the low dtype at its point of use, and
// autodiff adds the cast's VJP, the low-dtype weight gradient cast back to f32. Per step that is
// one cast kernel per parameter in the forward and one in the backward, none of them with a
// pointwise neighbour to fuse with. This pass, after autodiff:
//  1. replaces every `cast(param -> low)` by a graph input "low:<param name>" (Role::state) in the
//     low dtype: a persistent 16-bit copy of the weight, which the optimizer writes in the same
//     pass as it updates the f32 master (train/adamw.h), as DeepSpeed's bf16 optimizer keeps
//     `bf16_groups` beside its fp32 master partition. Readers of the cast read the input; the
//     gradient still flows to the f32 parameter through the cast's VJP (already in the graph);
//  2. folds `cast(matmul(a, b) -> f32)` where the 16-bit product has no other reader into the
//     GEMM itself (matmul's `dtype` attribute): the weight gradient comes out of oneDNN's f32
//     accumulator as it is, instead of rounded to bf16 and widened again (more accurate than
//     the unfused pair by up to one bf16 rounding; no other value changes). The same for the
//     experts' weight gradients (grouped_matmul_wgrad's `dtype`: each expert's f32 sum, so an
//     expert-parallel rank, whose GEMM sums the rows of several ranks at once, rounds nothing
//     one process's micro-batches do not) and a norm weight's gradient, rms_norm_backward's dw
//     (its `dw_dtype` attribute: the f32 sum).
// The autocast table still decides every dtype: no value changes dtype here, only which node
// makes it.
//
// Inputs: the new inputs come after every existing one, in parameter order (callers feed inputs
// positionally, Graph::inputs()); `low_weight_input_name` names them.
//
// Before: autocast and autodiff. After: remat (a recomputed layer reads the copy too, and
// recasts nothing), cse, pointwise fusion. Not with ZeRO-3 (the graph gathers f32 parameters
// from their shards; a 16-bit copy would need its own gather).
#pragma once

#include <string>

#include "passes/pass.h"

namespace lj {

// "low:<param name>": the graph input that holds a parameter's 16-bit copy.
std::string low_weight_input_name(const std::string& param_name);
// The parameter a low-copy input name belongs to; empty when `input_name` is not one.
std::string low_weight_param_name(const std::string& input_name);

class MasterWeightsPass : public Pass {
 public:
  const char* name() const override { return "master_weights"; }
  StatusOr<bool> run(Graph& g) override;

  // Of the last run.
  int64_t copies() const { return copies_; }
  int64_t folded_casts() const { return folded_; }

 private:
  int64_t copies_ = 0;
  int64_t folded_ = 0;
};

}  // namespace lj
