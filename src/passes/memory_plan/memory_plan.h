// The static memory plan of a graph at one concrete shape: liveness over the node order (the
// schedule) gives every buffer a byte offset in one arena, so a run allocates once.
//
// Buffers. Every value a node (other than `input`) produces needs storage, except:
//   - reshape (kAlias) outputs, which share their input's buffer and extend its lifetime;
//   - graph inputs and their aliases: the caller owns them;
//   - in place: an op flagged kInplace (graph/op.h) whose output has the same dims and element
//     size as an input that dies at this node takes that input's buffer (the kernels read each
//     element before writing the same element). Never a graph input, a graph output, or a buffer
//     another input of the node also reads.
// Graph outputs (loss, gradients) and the values they alias must outlive the run: they get a
// place in the arena like any buffer (in the backward, usually in gaps the activations left),
// but it is never freed or reused during the run, so after the run the arena's output regions
// hold them. The executor hands them out as views that keep the arena alive, and starts the next
// run on a fresh arena when the caller still holds them (runtime/arena_memory.h).
//
// Liveness: a buffer is live from the node that produces it to the last node reading any value
// stored in it, both inclusive (a node's inputs and outputs are live together). Offsets, best fit
// over free gaps (the smallest gap that holds the buffer), two ways, the smaller arena kept:
//   in node order: an allocator replayed over the schedule; a buffer is freed after its last
//                  node, the arena grows when no gap holds the next one;
//   by size:       largest first, each in the best gap between the already placed buffers whose
//                  lifetimes overlap its own (offline: it sees every lifetime, so long-lived
//                  gradients made between short-lived temporaries leave no holes).
// Sizes and offsets are multiples of kPlanAlignment.
//
// Before: the schedule (passes/schedule) and every pass that adds or reorders nodes. The plan
// belongs to the node order it was made for: reordering invalidates it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/mem_category.h"
#include "core/shape.h"
#include "core/status.h"
#include "graph/ir.h"

namespace lj {

inline constexpr int64_t kPlanAlignment = 64;

struct PlanOptions {
  bool inplace = true;  // let kInplace ops take a dying input's buffer
};

struct PlanBuffer {
  int64_t bytes = 0;    // rounded up to kPlanAlignment
  int64_t offset = -1;  // in the arena
  int first = 0;        // node index that produces it
  int last = 0;         // last node index that reads it (== first when unread); the node
                        // count for a graph output (live after the run)
  bool output = false;  // holds a graph output
};

struct MemoryPlan {
  SymEnv env;
  // Per value (indexed by ValueId): its buffer, or -1 (graph inputs, their aliases, values
  // no node produces).
  std::vector<int32_t> buffer_of;
  std::vector<PlanBuffer> buffers;
  // Per value: its category (core/mem_category.h, the executor's meaning).
  std::vector<MemCategory> category;

  int64_t bytes_arena = 0;      // the arena's size
  int64_t bytes_naive = 0;      // every value in a buffer of its own (no reuse, no in place)
  int64_t bytes_peak_live = 0;  // most bytes live at one node: a lower bound on the arena
  int peak_node = -1;           // node index where bytes_peak_live is reached
  // The arena's contents at peak_node by category (sums to bytes_peak_live).
  std::array<int64_t, kNumMemCategories> bytes_at_peak{};
  int64_t at_peak(MemCategory c) const { return bytes_at_peak[static_cast<size_t>(c)]; }
  int64_t bytes_outputs = 0;   // graph outputs (their regions, included in the arena)
  int num_inplace = 0;         // values that took an input's buffer
  int num_alias = 0;           // reshape outputs sharing a buffer
  const char* placement = "";  // which placement won: "in node order" or "by size"
  double plan_ms = 0;          // time to make the plan

  // Byte offset of value v in the arena; -1 when it is not in the arena.
  int64_t offset(ValueId v) const;
  // Whether v is (or aliases) a graph output.
  bool is_output(ValueId v) const;
};

// Every value's category, as the executor counts it: forward values read by a backward (or
// optimizer) node are activations; backward / optimizer values that are graph outputs are
// grads / optimizer; all else temporaries. Graph inputs get temporaries (their owner decides).
std::vector<MemCategory> value_categories(const Graph& g);

// Plans g's buffers under env (every symbol in g's shapes bound). Errors: an unbound symbol.
StatusOr<MemoryPlan> plan_memory(const Graph& g, const SymEnv& env,
                                 const PlanOptions& options = {});

// Checks a plan against its graph: every buffer lies inside the arena, and any two
// buffers whose lifetimes overlap have disjoint byte ranges; in-place and alias values share a
// buffer only as described above. Returns the first violation found.
Status check_plan(const Graph& g, const MemoryPlan& plan);

// The compile log's lines, one fact each:
//   memory plan (B=4 T=256): 512 buffers, 40 in place, 90 reshape aliases, placed by size,
//     planned in 1.2 ms  (one line)
//   memory plan: naive 1.23 GiB -> arena 456 MiB; peak live 440 MiB
//   memory plan: at peak: activations 300 MiB, temporaries 140 MiB
//   memory plan: graph outputs (kept in the arena after the run): 90.5 MiB
std::string memory_plan_summary(const MemoryPlan& plan);

}  // namespace lj
