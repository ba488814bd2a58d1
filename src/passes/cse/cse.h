// Common-subexpression elimination: two nodes with the same op, the same input values and equal
// attributes compute the same values (kernels are deterministic), so the later one is dropped
// and every use of its outputs reads the earlier one's instead. Nodes are visited in topological
// order with inputs already rewritten, so a duplicated chain collapses in one run.
//
// Never merged: `input` nodes (each is a separate caller-fed value). random_normal and
// random_uniform merge only when all attributes, seed included, are equal: their values are a
// pure function of (seed, element index), so equal attributes are the same values, and
// different seeds never compare equal.
//
// A graph output cannot be renamed, so when the dropped node's output is a graph output the
// surviving node takes over that value id (the earlier position, the later id); when both
// nodes' outputs at the same index are graph outputs, the two are not merged.
//
// Before: nothing required. After: dce is not needed (the dropped node is removed here) but
// cse exposes no new dead code either. Must NOT run after a recompute (remat) pass: the copies a
// remat pass makes are deliberate duplicates of forward nodes, and cse would merge them back,
// undoing the recomputation (XLA runs its CSE before rematerialization for the same reason).
#pragma once

#include "passes/pass.h"

namespace lj {

class CsePass : public Pass {
 public:
  const char* name() const override { return "cse"; }
  StatusOr<bool> run(Graph& g) override;
};

}  // namespace lj
