// The schedule: reorders the nodes (a valid topological order, deterministic) to lower the peak
// of live bytes. Same nodes, same inputs: results are unchanged, only when each runs.
//
// Candidates, each scored by the memory plan's peak live bytes (passes/memory_plan, in place
// included) under a nominal shape, the lowest kept (the current order wins ties, so the pass
// never makes the peak worse at that shape):
//   - the current order;
//   - sink: a node whose inputs all live on anyway (graph inputs, graph outputs, or values
//     made by other sunk nodes) runs just before its first consumer. Moves backward constants,
//     zeros and weight-only work next to where they are needed, shortening their lifetimes
//     without lengthening any other;
//   - greedy: a list scheduler that runs, among the ready nodes, the one that frees the most
//     bytes net of what it allocates (the earlier node on ties); `input` nodes stay first.
// Ties in peak live bytes go to the smaller arena, then to the earlier candidate.
// Sizes are evaluated under `nominal` (symbols it leaves unbound get kNominalSymbol): the order
// is made once per graph and serves every shape, so the nominal shape only ranks candidates.
//
// Before: every pass that adds or removes nodes (autodiff, remat, cse, dce, fusion). Runs last
// among graph passes; the memory plan is made after it, per concrete shape.
#pragma once

#include <vector>

#include "core/shape.h"
#include "passes/pass.h"

namespace lj {

class SchedulePass : public Pass {
 public:
  static constexpr int64_t kNominalSymbol = 64;
  explicit SchedulePass(SymEnv nominal = {}) : nominal_(nominal) {}
  const char* name() const override { return "schedule"; }
  StatusOr<bool> run(Graph& g) override;

 private:
  SymEnv nominal_;
};

enum class ScheduleStrategy : uint8_t { sink, greedy };
// One candidate order of g's nodes (indices into g.nodes()), sizes under env; for tests and
// measurements.
std::vector<int> schedule_order(const Graph& g, const SymEnv& env, ScheduleStrategy strategy);

}  // namespace lj
