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
//
// RematPass is the rewrite. A region's forward nodes are the forward-phase nodes whose scope is
// "model.layers.<l>" or starts with "model.layers.<l>." for a layer l of the region. Kept
// (read by the backward as they are): values produced outside the region (parameters, rope
// tables, the region's input), the region's outputs that forward nodes outside it read (its
// residual-stream output: the next region's input, as Megatron keeps a checkpointed chunk's
// output), graph outputs and, for selective, the outputs of contraction and attention ops
// (matmul; sdpa's out and lse). Every other region value a backward (or optimizer) node reads is
// recomputed: the forward nodes that produce it are cloned, transitively and only as far as
// needed, as backward-phase nodes with the same op, attributes and scope plus the attribute
// `recompute=true`; the clones of a region run right before the first backward node that reads
// any of them, and those readers are rewired to the clones. The originals then die in the
// forward pass, so the eager executor (which frees after last use) holds only the kept values.
// Clones compute the same kernels on the same inputs, so loss and gradients are bitwise those
// of the graph without recompute.
//
// Before: autodiff (append_gradients), since the pass rewires backward readers. After: pointwise
// fusion, schedule and memory plan (passes/pipeline/pipeline.h). CSE must NOT run after it: the
// clones are deliberate duplicates (the `recompute` attribute keeps passes/cse from merging them
// anyway). A schedule pass that moves the clones earlier gives the memory back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "passes/pass.h"

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

// Forward nodes of a layer: the layer index in a scope "model.layers.<l>" or
// "model.layers.<l>.<...>"; -1 for any other scope.
int64_t layer_of_scope(const std::string& scope);

class RematPass : public Pass {
 public:
  RematPass(RecomputeConfig config, int64_t num_layers)
      : config_(config), num_layers_(num_layers) {}
  const char* name() const override { return "remat"; }
  // An error when the config does not validate for num_layers.
  StatusOr<bool> run(Graph& g) override;

  // Nodes cloned by the last run, in total and per region (config.regions(num_layers) order).
  int64_t nodes_cloned() const;
  const std::vector<int64_t>& nodes_cloned_per_region() const { return cloned_per_region_; }

 private:
  RecomputeConfig config_;
  int64_t num_layers_;
  std::vector<int64_t> cloned_per_region_;
};

}  // namespace lj
