// Recompute (activation checkpointing) as a graph rewrite on the joint graph, with Megatron's
// meanings:
//   --recompute none|selective|full
//       selective: inside a recomputed layer keep the outputs of matmul and sdpa, recompute the
//                  norms and elementwise ops from them in the backward region;
//       full:      keep only the layer's input; the backward region recomputes the whole layer.
//   --recompute-layers N, --recompute-method uniform|block
//       block:   the first N layers are recomputed, the others keep everything;
//       uniform: every layer is recomputed, in chunks of N consecutive layers that keep only the
//                chunk's input (N = 1: each layer is its own chunk).
// Runs after autodiff and before pointwise fusion, schedule and memory plan (DESIGN.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace lj {

enum class RecomputePolicy : uint8_t { none, selective, full };
enum class RecomputeMethod : uint8_t { uniform, block };

const char* recompute_policy_name(RecomputePolicy p);
const char* recompute_method_name(RecomputeMethod m);
StatusOr<RecomputePolicy> parse_recompute_policy(std::string_view s);
StatusOr<RecomputeMethod> parse_recompute_method(std::string_view s);

struct RecomputeConfig {
  RecomputePolicy policy = RecomputePolicy::none;
  // block: how many layers (from the first) are recomputed; uniform: layers per chunk.
  // -1: block -> all layers, uniform -> 1.
  int64_t layers = -1;
  RecomputeMethod method = RecomputeMethod::uniform;

  bool operator==(const RecomputeConfig&) const = default;
  // Recomputed layers of a model with num_layers layers.
  int64_t recomputed_layers(int64_t num_layers) const;
  // Layer ranges [first, last] that are recomputed as one region each, in order.
  struct Region {
    int64_t first = 0, last = 0;
  };
  std::vector<Region> regions(int64_t num_layers) const;
  // "none", "selective, 12 of 32 layers (block)", "full, chunks of 2 layers (uniform)".
  std::string to_string(int64_t num_layers) const;
  // An error for N < -1 or N = 0 with a policy other than none, or N above num_layers.
  Status validate(int64_t num_layers) const;
};

}  // namespace lj
