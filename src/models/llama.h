// The Llama forward graph, in primitives as HF's modeling_llama.py computes it: RMSNorm as
// square/mean/rsqrt/mul, rotary embedding as slices/neg/concat/mul/add (half-split), attention
// through sdpa (grouped-query), SwiGLU as silu/mul, linear layers as matmul with (out, in)
// weights. The dense families beside it change only attention, as their modeling_*.py do:
// Qwen2 adds biases to q, k and v (matmul + add), Qwen3 RMS-normalises each head of q and k
// before RoPE (q_norm, k_norm), the sliding window (Mistral's on every layer, Qwen's from
// max_window_layers on) is sdpa's window. Mixtral and Qwen3-MoE replace the MLP of their sparse
// layers with the mixture of experts of models/moe.h, and add its load-balancing loss to the
// loss when output_router_logits. Parameters are graph inputs named with HF tensor
// names, node scopes follow HF module names (model.layers.3.self_attn.q_proj).
#pragma once

#include <string>
#include <vector>

#include "graph/builder.h"
#include "models/config.h"

namespace lj {

struct LlamaGraph {
  // Inputs, in the graph's input order: tokens (B, T) i32, targets (B, T) i32 (already shifted:
  // targets[t] is the token after tokens[t]; -100 = ignore), rope.cos / rope.sin (T, D), then
  // the parameters in HF order.
  ValueId tokens = kNoValue;
  ValueId targets = kNoValue;
  ValueId rope_cos = kNoValue;
  ValueId rope_sin = kNoValue;
  std::vector<ValueId> params;
  ValueId logits = kNoValue;  // (B, T, V)
  ValueId loss = kNoValue;    // () mean cross-entropy over targets != -100
};

// HF tensor names and shapes of every parameter, in the order build_llama declares them.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> dims;
  bool is_norm = false;  // initialised to ones
  bool is_bias = false;  // initialised to zeros (HF's _init_weights zeroes Linear biases)
  // Expert parallelism (N > 1 only): a sparse layer's expert weights (mlp.experts.*), which a
  // rank holds for its E / N experts only (dims[0] = E / N), and where its slice starts in the
  // whole tensor's elements (its initialisation stream continues from there, so the slices of the N
  // ranks are the whole tensor's values).
  bool is_expert = false;
  int64_t expert_offset = 0;
};
// `experts`: a rank of an expert-parallel group (models/config.h): the expert weights are its
// slice. Size 1: the whole model.
std::vector<ParamSpec> llama_param_specs(const LlamaConfig& c, const ExpertShard& experts = {});

// A host callback (an `opaque` op, backends/host_callback.h) applied to the residual stream
// after one layer: user code inside the model, and a graph break for the compiler.
struct LayerCallback {
  std::string callback;      // "" = none
  int64_t after_layer = -1;  // 0-based layer index
};

// Builds the forward graph with symbolic B and T into `g`. Adds outputs "loss" and, when
// `output_logits`, "logits". `experts`: expert parallelism (models/moe.h); the parameters stay
// whole either way.
StatusOr<LlamaGraph> build_llama(const LlamaConfig& c, Graph* g, DType dtype = DType::f32,
                                 bool output_logits = false, const LayerCallback& hook = {},
                                 const ExpertShard& experts = {});

}  // namespace lj
