// The planned executor's memory (ExecutorOptions::planned): one arena per concrete shape laid
// out by the static memory plan (passes/memory_plan), and the plans themselves, cached by the
// bound symbols (B=4 T=256 -> its plan), so a shape seen before is not planned again.
//
// Accounting: the arena is allocated once per shape change from the device's allocator,
// uncached, counted by category as the plan's peak holds it (activations, temporaries, ...;
// the gap between the arena and the plan's peak live bytes, fragmentation, under temporaries).
// So MemoryStats shows the arena as memory held for the whole run, by category. Values outside
// the arena (graph outputs) come from the caching allocator as in eager mode.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "passes/memory_plan/memory_plan.h"
#include "runtime/tensor.h"

namespace lj {

class PlannedMemory {
 public:
  PlannedMemory(const Graph& g, Device& dev) : g_(g), dev_(dev) {}
  ~PlannedMemory();
  PlannedMemory(const PlannedMemory&) = delete;
  PlannedMemory& operator=(const PlannedMemory&) = delete;

  // Makes (or finds) the plan for env and sizes the arena for it.
  Status prepare(const SymEnv& env);
  // Storage for value v (a node output that is not a reshape) in this run: its place in the
  // arena, or a new tensor from the allocator for a value outside it.
  Tensor output(ValueId v, DType dtype, std::vector<int64_t> dims, MemCategory category);

  const MemoryPlan& plan() const { return *current_; }
  int64_t plans_made() const { return plans_made_; }
  int64_t cache_hits() const { return cache_hits_; }

 private:
  void release_arena();

  const Graph& g_;
  Device& dev_;
  std::vector<std::unique_ptr<MemoryPlan>> cache_;
  const MemoryPlan* current_ = nullptr;
  const MemoryPlan* arena_plan_ = nullptr;  // the plan the arena is laid out for
  void* arena_ = nullptr;
  CachingAllocator::CategoryBytes arena_split_{};
  int64_t plans_made_ = 0;
  int64_t cache_hits_ = 0;
};

}  // namespace lj
