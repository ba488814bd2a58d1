// HF model folders: config.json plus model.safetensors, or shards named in
// model.safetensors.index.json. Loading converts bf16/f16 weights to f32 (the master weights);
// saving writes f32, bf16 or f16 (rounded to nearest even) with HF tensor names, `format: pt`
// metadata and config.json's torch_dtype naming the dtype written, so transformers'
// from_pretrained reads it. Experts are written one tensor each under the Hub's names
// (models/hub_names.h); loading reads those, or the fused tensors transformers 5 holds in memory.
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

struct HfSaveOptions {
  // The weights' dtype in the files: f32, bf16 or f16 (an f16 overflow is an error).
  DType dtype = DType::f32;
  // Shards when the weights exceed this (HF's save_pretrained default is 5 GB).
  int64_t max_shard_bytes = 5'000'000'000;
  // Files copied into the folder under their own names (the tokenizer a run was trained with).
  std::vector<std::string> extra_files = {};
};

// Writes a new folder `dir` (which must not exist): built in a temporary folder beside it,
// every file fsynced, then renamed into place. `params` are f32.
Status save_hf_model(const std::string& dir, const LlamaConfig& config,
                     const std::vector<ParamSpec>& specs, const std::vector<Tensor>& params,
                     const HfSaveOptions& options = {});

}  // namespace lj
