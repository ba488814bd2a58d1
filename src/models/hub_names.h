// The Hub's tensor names of ljperf's parameters. Dense parameters keep their names. A mixture of
// experts holds each layer's experts fused as transformers 5 does in memory
// (mlp.experts.gate_up_proj (E, 2F, C), mlp.experts.down_proj (E, C, F)), while the Hub's files
// (and transformers 5's save_pretrained) hold one tensor per expert and projection:
//   Mixtral:    block_sparse_moe.gate.weight, block_sparse_moe.experts.{e}.w1 (gate), w3 (up),
//               w2 (down) .weight
//   Qwen3-MoE:  mlp.gate.weight, mlp.experts.{e}.gate_proj, up_proj, down_proj .weight
// Each piece is a contiguous block of rows of the fused tensor, so loading and export copy
// blocks, without a transpose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/llama.h"

namespace lj {

struct HubPiece {
  std::string name;           // the Hub's tensor name
  std::vector<int64_t> dims;  // its shape
  int64_t offset = 0;         // its first element within the parameter
};

// The Hub tensors that make up parameter `s` of model `c`, in the parameter's element order:
// one piece named s.name for a dense parameter.
std::vector<HubPiece> hub_pieces(const LlamaConfig& c, const ParamSpec& s);

}  // namespace lj
