// autocast: bf16 mixed precision as a graph rewrite (docs/architecture.md, "The pipeline"). One
// table, kAutocastRules, says for every op whether it computes in the low dtype (bf16), in f32,
// follows its inputs, or keeps what it is given; the pass puts `cast` nodes where a value's dtype
// must change, and the ops after them take the dtype their shape rules infer.
//
// What a Llama graph looks like after it (DeepSpeed's bf16 recipe):
//   - parameters stay f32 graph inputs (the master weights); each is cast to bf16 at its point of
//     use, so its gradient comes out of cast's VJP in f32 and accumulation and AdamW stay f32
//     (after autodiff, passes/master_weights turns those casts into persistent 16-bit copies
//     that the optimizer writes, and folds the weight gradients' casts into their GEMMs);
//   - matmul, matmul_add, sdpa and linear_cross_entropy take bf16 operands (oneDNN accumulates
//     in f32); their outputs are bf16 but for the losses, which are f32;
//   - the embedding gather reads the f32 table and its output is cast to bf16, so the residual
//     stream and every activation between the GEMMs is bf16 (elementwise ops follow their
//     inputs: one bf16 operand makes the op bf16);
//   - reductions, softmax, the losses and rms_norm's statistics (square -> mean -> rsqrt) run
//     in f32: their bf16 inputs are cast up first; cross_entropy takes the bf16 logits as they
//     are (no (N, V) f32 copy) and its kernel runs the softmax and the loss in f32. Fused rms_norm
//     computes its statistics in f32 inside the kernel (it follows x's dtype but accumulates in
//     f32).
//
// Value ids: every value keeps its id and its type. A node whose output types change gets fresh
// output values (readers are rewired to them); a graph output whose producer changed type is
// produced again, in its old type, by a cast. Inputs (and so LlamaGraph's ids) never change.
//
// Before: pattern fusion (the fused ops have rows here too, and their patterns are written over
// the primitives in one dtype). After: nothing in the forward stage; autodiff must follow, so the
// backward gets the cast VJPs (cast back) and runs in the dtypes the forward chose.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "core/dtype.h"
#include "passes/pass.h"

namespace lj {

enum class CastPolicy : uint8_t {
  keep,        // no casts (sources, data movement, callbacks, cast itself)
  low,         // f32 float inputs are cast to the low dtype: the op computes in bf16
  f32,         // low-dtype inputs are cast to f32: the op computes in f32
  follow,      // one low-dtype float input makes every f32 float input low; else keep
  low_output,  // the op is left as it is and its f32 output is cast to the low dtype
};
const char* cast_policy_name(CastPolicy p);

struct AutocastRule {
  Op op;
  CastPolicy policy;
  std::string_view why;
};

// The autocast table. Ops without a row keep what they are given (CastPolicy::keep); the ops
// that only exist after autodiff (the *_backward ops, fused_pointwise) never meet the pass.
std::span<const AutocastRule> autocast_rules();
CastPolicy autocast_policy(Op op);

class AutocastPass : public Pass {
 public:
  // `low`: bf16 or f16.
  explicit AutocastPass(DType low = DType::bf16);
  const char* name() const override { return "autocast"; }
  StatusOr<bool> run(Graph& g) override;

 private:
  DType low_;
};

std::unique_ptr<Pass> make_autocast_pass(DType low = DType::bf16);

}  // namespace lj
