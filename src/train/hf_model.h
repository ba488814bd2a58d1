// HF model folders: config.json plus model.safetensors, or shards named in
// model.safetensors.index.json. Loading converts bf16/f16 weights to f32; saving writes f32 with
// HF tensor names and `format: pt` metadata so transformers' from_pretrained reads it.
#pragma once

#include <string>
#include <vector>

#include "models/llama.h"
#include "runtime/tensor.h"

namespace lj {

struct HfModel {
  LlamaConfig config;
  std::vector<ParamSpec> specs;
  std::vector<Tensor> params;  // in specs order, f32, counted as weights
};

// `dir` holds config.json and the weights.
StatusOr<HfModel> load_hf_model(const std::string& dir, Device& dev);

// Writes a new folder `dir` (which must not exist): built in a temporary folder beside it,
// every file fsynced, then renamed into place. Shards when the weights exceed
// `max_shard_bytes` (HF's save_pretrained default is 5 GB).
Status save_hf_model(const std::string& dir, const LlamaConfig& config,
                     const std::vector<ParamSpec>& specs, const std::vector<Tensor>& params,
                     int64_t max_shard_bytes = 5'000'000'000);

}  // namespace lj
