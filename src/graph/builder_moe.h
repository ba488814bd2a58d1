// Builder functions of the mixture-of-experts ops (graph/ops.def says what each computes).
#pragma once

#include "graph/builder.h"

namespace lj {

// The k largest of x (..., E) along the last axis: indices (..., k) i32, largest first.
Val topk(Val x, int64_t k);
struct MoeSortResult {
  Val token;        // (N*k) i32: the token of each sorted row
  Val inverse;      // (N*k) i32: the sorted row of pair n*k + j
  Val group_sizes;  // (E) i32: rows per expert
};
// Sorts the (token, choice) pairs of indices (N, k) by expert, stably.
MoeSortResult moe_sort(Val indices, int64_t experts);
// x (R, K) grouped by group_sizes (E) times w (E, N, K) [tb] or (E, K, N) -> (R, N).
Val grouped_matmul(Val x, Val w, Val group_sizes, bool tb);
// a (R, P), b (R, Q) -> (E, P, Q): a_e^T b_e per group.
Val grouped_matmul_wgrad(Val a, Val b, Val group_sizes);

// Expert parallelism over `ranks` ranks (graph/ops.def ep_route, ep_dispatch, ep_combine).
struct ExpertRouteVals {
  Val recv_sizes;   // (E) i32: [q L + l] rows rank q sends for local expert l
  Val local_sizes;  // (L) i32: rows of each local expert, summed over the senders
};
ExpertRouteVals ep_route(Val group_sizes, int64_t ranks);
// rows (M, W) sorted by expert -> (ranks M, W): this rank's experts' rows, then zero rows.
Val ep_dispatch(Val rows, Val group_sizes, Val recv_sizes, int64_t ranks);
// y (ranks M, W) as ep_dispatch gave them -> (M, W) back in this rank's sorted order.
Val ep_combine(Val y, Val group_sizes, Val recv_sizes, int64_t ranks);

}  // namespace lj
