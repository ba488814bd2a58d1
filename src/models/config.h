// Model configuration: the fields of HF's LlamaConfig that change the computation, the few that
// the dense families beside Llama add (Qwen2's q/k/v biases, Qwen3's q/k norms, the sliding
// windows of Mistral and Qwen), the mixture-of-experts MLP (Mixtral, Qwen3-MoE), and the presets
// (one table, presets.cc), with the values of the published HF config.json files (each preset names
// its source).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace lj {

struct RopeScaling {
  bool llama3 = false;  // rope_type "llama3"; otherwise no scaling
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// The most decoder layers a config may name (docs/limits.md): the largest published models have
// about 130, and every layer is a loop over the graph builder's and the checks' work.
constexpr int64_t kMaxHiddenLayers = 65536;

// The HF architecture a config describes (models/families.h holds each one's names).
enum class ModelFamily {
  llama,      // LlamaForCausalLM
  qwen2,      // Qwen2ForCausalLM (Qwen2, Qwen2.5)
  qwen3,      // Qwen3ForCausalLM
  mistral,    // MistralForCausalLM
  mixtral,    // MixtralForCausalLM: Mistral's attention, every MLP a mixture of experts
  qwen3_moe,  // Qwen3MoeForCausalLM: Qwen3's attention, sparse MLPs where MoeConfig says
};

// Mixture-of-experts MLP (transformers' MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock): a router
// (E, C) picks the top k of softmax(router logits) per token; each chosen expert is a SwiGLU MLP
// of moe_intermediate_size; the token's output is the experts' outputs weighted by the chosen
// probabilities (renormalised over the k when norm_topk_prob).
struct MoeConfig {
  int64_t num_experts = 0;            // E (Mixtral: num_local_experts); 0: a dense model
  int64_t top_k = 0;                  // k (num_experts_per_tok)
  int64_t moe_intermediate_size = 0;  // each expert's F (Mixtral: intermediate_size)
  bool norm_topk_prob = true;         // Mixtral: always; Qwen3-MoE: config.json's flag
  // Qwen3-MoE: layer l is sparse when (l + 1) % decoder_sparse_step == 0 and l is not in
  // mlp_only_layers; the others keep a dense MLP of intermediate_size. Mixtral: every layer.
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers = {};
  // The load-balancing loss (transformers' load_balancing_loss_func) times router_aux_loss_coef
  // is added to the loss when output_router_logits is true, as MixtralForCausalLM does.
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;
};

// Expert parallelism as one rank's graph sees it (--expert-parallel N; train/expert_parallel.h
// makes the groups): the N ranks of its expert-parallel group route their tokens to one another,
// and this rank, `rank` of them, runs experts [rank E / N, (rank + 1) E / N) of every sparse layer
// on the rows sent to them (models/moe.cc). size 1: every expert here, no exchange.
struct ExpertShard {
  int size = 1;
  int rank = 0;
  bool operator==(const ExpertShard&) const = default;
};

struct LlamaConfig {
  std::string name;  // preset name, or the config.json path
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;          // C
  int64_t intermediate_size = 0;    // F
  int64_t num_hidden_layers = 0;    // L
  int64_t num_attention_heads = 0;  // H
  int64_t num_key_value_heads = 0;  // G
  int64_t head_dim = 0;             // D
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-5;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  // config.json's torch_dtype (transformers v5: dtype): the dtype the weights are published in
  // (f32, bf16 or f16). It does not change the computation: ljperf loads any of them into f32
  // master weights. `ljperf export` writes it unless --dtype says otherwise.
  DType torch_dtype = DType::f32;
  ModelFamily family = ModelFamily::llama;
  // Qwen2: q_proj, k_proj and v_proj carry biases ((H·D), (G·D), (G·D)); o_proj has none.
  bool qkv_bias = false;
  // Qwen3: q_norm and k_norm, RMSNorm over D of each head of q and k, before RoPE; weights (D).
  bool qk_norm = false;
  // Mistral, and Qwen with use_sliding_window: query i sees keys j with i - window < j <= i
  // (transformers' sliding_window_overlay: kv_idx > q_idx - sliding_window); 0 = full causal
  // attention (config.json's null, or Qwen's use_sliding_window false).
  int64_t sliding_window = 0;
  // The window covers the layers from this one on (Qwen's max_window_layers; Mistral: 0, all).
  int64_t max_window_layers = 0;
  // The window of layer l: sliding_window, or 0 (full causal) before max_window_layers.
  int64_t window_of_layer(int64_t l) const { return l >= max_window_layers ? sliding_window : 0; }
  MoeConfig moe = {};
  bool is_moe() const { return moe.num_experts > 0; }
  // Whether layer l's MLP is the mixture of experts (false for every layer of a dense model).
  bool is_sparse_layer(int64_t l) const;
  int64_t num_sparse_layers() const;

  // Parameters, all counted once (a tied embedding counts once).
  int64_t num_params() const;
  // Parameters without the input embedding (the LM head counts).
  int64_t num_params_without_embedding() const;
  // The parameters one token uses, without the input embedding: N in 6N + 12·L·H·Q·T. A
  // mixture of experts counts its router and top_k of its experts; a dense model, all of them.
  int64_t num_active_params_without_embedding() const;
  // Training FLOPs per token, torchtitan's convention: 6·N + 12·L·H·Q·T with N the active
  // parameters without the input embedding, Q the head dim, T the sequence length; causal
  // attention not halved, recompute not counted.
  double flops_per_token(int64_t seq_len) const;
  Status validate() const;
  // The mixture-of-experts settings (models/moe_config.cc): k within the experts, sizes positive.
  Status validate_moe() const;
};

// Presets: llama3-8b, llama3.1-70b, llama3.2-1b, llama3.2-3b, qwen2.5-0.5b, qwen2.5-7b,
// qwen3-0.6b, qwen3-8b, mistral-7b, mixtral-8x7b, qwen3-30b-a3b, and the CPU presets tiny,
// small, tiny-moe.
StatusOr<LlamaConfig> llama_preset(const std::string& name);
std::vector<std::string> llama_preset_names();

// inv_freq[i] = 1 / theta^(2i/D), i < D/2, with llama3 scaling applied when configured; f32 as
// HF computes it.
std::vector<float> rope_inv_freq(const LlamaConfig& c);
// cos and sin tables (T, D) in HF's half-split layout (emb = cat(freqs, freqs)), computed in f32.
void rope_tables(const LlamaConfig& c, int64_t seq_len, std::vector<float>* cos,
                 std::vector<float>* sin);

}  // namespace lj
