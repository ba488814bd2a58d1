// What the pattern-fusion rules share: an index of who reads each value, and the rewrite that
// puts a fused node where a matched subgraph of primitives was.
//
// A fused node takes over value ids of the subgraph it replaces (rms_norm's y is the old final
// mul's output, its rstd the old rsqrt's), so nothing downstream is rewired, graph outputs stay
// valid and no value is left without a producer. A Fusion is accepted only when it is exact:
// the fused op's inferred output types equal the types of the values it takes over, every other
// value of a replaced node is read by replaced nodes alone (and is no graph output), the fused
// node's inputs are defined before the place it goes (the first taken-over value's producer),
// every replaced node has the fused node's phase, and no node belongs to two fusions. Nodes that
// are not taken over or replaced are left alone, so a matched intermediate with a user outside the
// pattern stops the fusion instead of being lost.
#pragma once

#include <vector>

#include "graph/ir.h"

namespace lj::fusion {

// Readers of every value of a graph, fixed when built (rules match on the unmodified graph and
// the Rewriter applies every accepted fusion at the end).
class UseIndex {
 public:
  explicit UseIndex(const Graph& g);
  // Nodes reading v, in node order (a node reading v twice is listed twice).
  const std::vector<NodeId>& users(ValueId v) const { return users_[static_cast<size_t>(v)]; }
  bool is_output(ValueId v) const { return is_output_[static_cast<size_t>(v)]; }
  // Position of v's producer in the node list.
  NodeId producer(ValueId v) const { return producer_[static_cast<size_t>(v)]; }

 private:
  std::vector<std::vector<NodeId>> users_;
  std::vector<bool> is_output_;
  std::vector<NodeId> producer_;
};

struct Fusion {
  Node node;                     // the fused node; its outputs are taken-over value ids
  std::vector<NodeId> replaced;  // matched nodes it replaces (removed from the graph)
  // Matched nodes removed only when nothing outside the fusion reads them (a shared constant).
  std::vector<NodeId> optional;
};

class Rewriter {
 public:
  explicit Rewriter(const Graph& g) : g_(g), uses_(g), claimed_(g.nodes().size(), false) {}
  const UseIndex& uses() const { return uses_; }
  // The position of v's producer when it is an `op` node not yet claimed by a fusion, else -1.
  NodeId match(ValueId v, Op op) const;
  // Whether node i is part of an accepted fusion already.
  bool claimed(NodeId i) const { return claimed_[static_cast<size_t>(i)]; }
  // Accepts f when it is exact (see the top of the file); false leaves nothing recorded.
  bool accept(Fusion f);
  int accepted() const { return static_cast<int>(fusions_.size()); }
  // Rebuilds g's node list with every accepted fusion; returns whether anything changed.
  bool apply(Graph& g);

 private:
  struct Placed {
    Node node;
    NodeId at;  // the position it takes
  };
  const Graph& g_;
  UseIndex uses_;
  std::vector<bool> claimed_;  // per node: replaced by an accepted fusion
  std::vector<Placed> fusions_;
};

// Normalizes axis into [0, rank); -1 when out of range.
int norm_axis(int64_t axis, int rank);

}  // namespace lj::fusion
