// The GEMM calls the CPU kernels make for a graph's contraction nodes, as they issue them
// (backends/cpu/matmul.cc: one GEMM over every leading row when b is a weight, else one per batch
// matrix; backends/cpu/loss.cc: linear_cross_entropy's logits, dx and dw GEMMs per chunk of
// rows; backends/cpu/moe.cc: a grouped GEMM's one GEMM per expert, over the rows
// graph/moe_rows.h counts, spread evenly). The shapes are what host_rates.h measures classes of and
// what the host time model (plan/time_model.h host_step_times) prices a contraction node by.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "probe/host_rates.h"

namespace lj {

// The GEMMs one contraction node runs, each with its count; the fused loss's logits elements.
struct NodeGemms {
  std::vector<std::pair<GemmSample, int64_t>> gemms;
  double logits = 0;
};
NodeGemms node_gemms(const Graph& g, const Node& n, const SymEnv& env);

// Every GEMM the graph's contraction nodes run (shapes as host_step_times prices them).
std::vector<GemmSample> graph_gemm_shapes(const Graph& g, const SymEnv& env);

}  // namespace lj
