// Compiled regions and graph breaks. A compiled region is a maximal run of schedule-adjacent
// nodes the compiler may capture (op flag kCapturable); a node it may not (an opaque host
// callback today; collectives and data-dependent shapes later) is a graph break: it runs
// eagerly between two regions. A break never fails a compile; this analysis says where the
// breaks are and why, for the compile log. Run it on the final schedule (after every pass).
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace lj {

struct GraphBreak {
  NodeId node = -1;
  std::string op;     // "opaque"
  std::string scope;  // "model.layers.1"
  Phase phase = Phase::forward;
  std::string reason;  // "host callback 'probe'"
};

struct RegionReport {
  int64_t regions = 0;  // compiled regions (non-empty runs of capturable nodes)
  std::vector<GraphBreak> breaks;
  // "compiled regions 3, graph breaks 2" and one indented line per break.
  std::string to_string() const;
};

RegionReport find_regions(const Graph& g);

}  // namespace lj
