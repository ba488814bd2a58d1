// The planned executor's memory (ExecutorOptions::planned): one arena per concrete shape laid
// out by the static memory plan (passes/memory_plan), and the plans themselves, cached by the
// bound symbols (B=4 T=256 -> its plan), so a shape seen before is not planned again.
//
// Every value a node makes lives at its planned offset; graph outputs too, in regions the run
// never reuses. The outputs a run returns are views that share ownership of the arena: when
// the caller still holds one as the next run starts (gradient accumulation keeps the first
// micro-batch's gradients), that run gets a fresh arena and the old one is freed with the last
// view. Otherwise each run of the same shape reuses the same arena.
//
// Accounting: the arena is allocated from the device's allocator, uncached, and counted by
// category as the plan's peak holds it (activations, temporaries, grads, ...; the gap between
// the arena and the plan's peak live bytes, fragmentation, under temporaries), for as long as
// it is held. So MemoryStats shows the arena as memory held for the whole run, by category.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "passes/memory_plan/memory_plan.h"
#include "runtime/tensor.h"

namespace lj {

class ArenaMemory {
 public:
  ArenaMemory(const Graph& g, Device& dev) : g_(g), dev_(dev) {}
  ArenaMemory(const ArenaMemory&) = delete;
  ArenaMemory& operator=(const ArenaMemory&) = delete;

  // Makes (or finds) the plan for env and readies an arena for it.
  Status prepare(const SymEnv& env);
  // Storage for value v (a node output that is not a reshape) in this run: its place in the
  // arena. A graph output's view keeps the arena alive.
  Tensor output(ValueId v, DType dtype, std::vector<int64_t> dims);

  const MemoryPlan& plan() const { return *current_; }
  int64_t plans_made() const { return plans_made_; }
  int64_t cache_hits() const { return cache_hits_; }
  int64_t arenas_allocated() const { return arenas_allocated_; }

 private:
  struct Arena;  // one allocated arena; freed when the last reference goes

  const Graph& g_;
  Device& dev_;
  std::vector<std::unique_ptr<MemoryPlan>> cache_;
  const MemoryPlan* current_ = nullptr;
  std::shared_ptr<Arena> arena_;
  int64_t plans_made_ = 0;
  int64_t cache_hits_ = 0;
  int64_t arenas_allocated_ = 0;
};

}  // namespace lj
