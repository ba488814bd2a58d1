// The mixture-of-experts MLP of Mixtral and Qwen3-MoE, as transformers 5 computes it
// (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock), dropless:
//   router logits = x W_router^T (N, E); probs = softmax in f32; the top k per token, their
//   probabilities renormalised over the k when norm_topk_prob;
//   the N*k (token, choice) rows sorted by expert (moe_sort), gathered, run as one grouped GEMM
//   per projection with run-time group sizes (gate_up, SwiGLU, down), gathered back to
//   (token, choice) order and summed over the k with the router weights.
// The row count N*k is static, so the memory plan is too. The router's gradient flows through
// the chosen probabilities (a one-hot mask of the top-k indices times the probabilities).
// Parameters keep transformers 5's in-memory names: mlp.gate.weight (E, C),
// mlp.experts.gate_up_proj (E, 2F, C) (gate rows first, then up), mlp.experts.down_proj
// (E, C, F); train/hf_model.cc converts to and from the Hub's per-expert tensors.
#pragma once

#include <string>
#include <vector>

#include "graph/builder.h"
#include "models/llama.h"

namespace lj {

// The parameters of sparse layer `prefix` ("model.layers.3."), in build order; under expert
// parallelism the expert weights are the rank's E / N experts (ParamSpec::is_expert).
void moe_param_specs(const LlamaConfig& c, const std::string& prefix, std::vector<ParamSpec>* p,
                     const ExpertShard& experts = {});
// Whether a parameter name is a sparse layer's expert weights (mlp.experts.*).
bool is_expert_param(const std::string& name);

struct MoeMlp {
  Val out;            // (B, T, C)
  Val load_fraction;  // (E) f32: the share of tokens that chose each expert, count / N
  Val prob_mean;      // (E) f32: each expert's router probability averaged over the tokens
};
// h (B, T, C), the layer's normalised input; the weights as moe_param_specs lists them.
// Expert parallelism (`experts.size` N > 1): the sorted rows (M = N_tok k of them) travel to
// their expert's rank (ep_dispatch; a static capacity of N M rows, the ones past those received
// zero), run through this rank's E / N experts (w_gate_up and w_down hold only those), and
// travel back (ep_combine) before the unsort and the router weights. N = 1 builds exactly the
// graph above.
MoeMlp moe_mlp(const LlamaConfig& c, Val h, Val w_router, Val w_gate_up, Val w_down,
               const ExpertShard& experts = {});

// transformers' load_balancing_loss_func over the sparse layers (without attention mask):
// E * sum_e (sum_l load_fraction_l[e] / L) * (sum_l prob_mean_l[e] / L), L the sparse layers.
// The fractions carry no gradient (counts), the probabilities do.
Val load_balancing_loss(const LlamaConfig& c, const std::vector<MoeMlp>& layers);

}  // namespace lj
