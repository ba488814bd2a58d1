// The schedule: reorders the nodes (a valid topological order, deterministic) to lower the peak
// of live bytes. Same nodes, same inputs: results are unchanged, only when each runs.
//
// Candidates, each scored by the memory plan (passes/memory_plan, in place included) at several
// shapes: every symbol `nominal` leaves unbound set to 16, 64 and 256 in turn (B=T=16 ...).
// A candidate replaces the current order only when its peak live bytes are no higher at any of
// those shapes and lower at one (or, all equal, its arenas are smaller in sum): the pass never
// raises the peak at a scoring shape. The order is made once per graph and serves every shape.
//   - sink: a node whose inputs all live on anyway (graph inputs, graph outputs, or values
//     made by other sunk nodes) runs just before its first consumer. Moves backward constants,
//     zeros and weight-only work next to where they are needed, shortening their lifetimes
//     without lengthening any other;
//   - greedy: a list scheduler that runs, among the ready nodes, the one that frees the most
//     bytes net of what it allocates (the earlier node on ties); `input` nodes stay first.
// The candidates' own decisions (the greedy's byte counts) use symbols = kNominalSymbol.
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
  static constexpr int64_t kScoringSymbols[] = {16, 64, 256};
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
