// The mixture-of-experts parts of LlamaConfig: which layers are sparse, and the settings checked.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/config.h"

namespace lj {

bool LlamaConfig::is_sparse_layer(int64_t l) const {
  if (!is_moe()) return false;
  for (int64_t d : moe.mlp_only_layers) {
    if (d == l) return false;
  }
  return moe.decoder_sparse_step > 0 && (l + 1) % moe.decoder_sparse_step == 0;
}

int64_t LlamaConfig::num_sparse_layers() const {
  if (!is_moe() || moe.decoder_sparse_step <= 0 || num_hidden_layers <= 0) return 0;
  // Every decoder_sparse_step-th layer, less the distinct mlp_only_layers among them: counted
  // without a walk over the layers, which validate() runs before it has bounded their number.
  int64_t n = num_hidden_layers / moe.decoder_sparse_step;
  std::vector<int64_t> dense = moe.mlp_only_layers;
  std::sort(dense.begin(), dense.end());
  dense.erase(std::unique(dense.begin(), dense.end()), dense.end());
  for (int64_t d : dense) {
    if (d >= 0 && d < num_hidden_layers && (d + 1) % moe.decoder_sparse_step == 0) --n;
  }
  return n;
}

Status LlamaConfig::validate_moe() const {
  const std::string who = "model '" + name + "': ";
  if (family == ModelFamily::mixtral && !is_moe()) {
    return invalid_argument(who + "a Mixtral needs num_local_experts > 0",
                            "set num_local_experts (Mixtral-8x7B: 8)");
  }
  if (!is_moe()) return ok_status();
  const std::string e = std::to_string(moe.num_experts);
  if (moe.top_k < 1 || moe.top_k > moe.num_experts) {
    return invalid_argument(
        who + "num_experts_per_tok = " + std::to_string(moe.top_k) + " with " + e + " experts",
        "each token takes k of the experts: 1 <= num_experts_per_tok <= " + e);
  }
  if (moe.moe_intermediate_size <= 0) {
    return invalid_argument(who + "the experts' intermediate size must be positive",
                            "set moe_intermediate_size (Mixtral: intermediate_size)");
  }
  if (moe.decoder_sparse_step < 1) {
    return invalid_argument(who + "decoder_sparse_step must be at least 1",
                            "1 makes every layer sparse, 2 every second one");
  }
  if (!std::isfinite(moe.router_aux_loss_coef) || moe.router_aux_loss_coef < 0) {
    return invalid_argument(who + "router_aux_loss_coef must be a finite number >= 0",
                            "published configs use 0.001 (Qwen3-MoE) or 0.02 (Mixtral)");
  }
  return ok_status();
}

}  // namespace lj
