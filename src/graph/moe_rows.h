// The rows a grouped GEMM (graph/ops.def grouped_matmul, grouped_matmul_wgrad) multiplies, as
// the cost model counts them (graph/ir.h node_cost, the host time model's GEMM calls in
// probe/gemm_calls.h). Its rows operand holds R rows, a static count.
//   - Without expert parallelism all R are routed rows (moe_sort's N·k), sorted by expert.
//   - Under expert parallelism over P ranks (its group sizes come from ep_route) the rows are
//     ep_dispatch's receive buffer of capacity P·M. The group's P ranks send P·M rows in all, to
//     P ranks, so a rank receives M of them on average, and the rows past the received ones come
//     out zero without a GEMM (backends/cpu/moe.cc). The count is R / P: exact for the group's
//     mean, and for each rank when the router balances the experts.
#pragma once

#include "graph/ir.h"

namespace lj {

// 1 / P for a grouped GEMM whose group sizes come from ep_route over P ranks; 1 otherwise (and
// for any other node).
double grouped_rows_fraction(const Graph& g, const Node& n);

}  // namespace lj
