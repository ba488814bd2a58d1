// Dead-code elimination: drops every node none of whose outputs reaches a graph output.
// `input` nodes are always kept: callers feed inputs positionally (Graph::inputs()), so removing
// one would shift the others. A node with several outputs (sdpa) is kept whole when any output
// is live. Value ids are unchanged (Graph::set_nodes); dropped values simply have no producer
// in the node list any more.
//
// Before: nothing required. Run it after any pass that leaves unused values behind (cse,
// autodiff's unused partials) and before memory planning and scheduling, which would otherwise
// allocate and time dead work.
#pragma once

#include "passes/pass.h"

namespace lj {

class DcePass : public Pass {
 public:
  const char* name() const override { return "dce"; }
  StatusOr<bool> run(Graph& g) override;
};

}  // namespace lj
