// The token exchange of expert parallelism (Megatron's and torchtitan's meaning): the E experts
// of a mixture-of-experts layer are sharded over the P ranks of an expert-parallel group, rank p
// holding the L = E / P experts [p L, (p + 1) L). Each rank routes its own tokens; its routed
// rows, sorted by expert (models/moe.cc's moe_sort order), travel to their expert's rank by one
// all-to-all (dispatch), run there through the expert, and travel back by the inverse all-to-all
// (combine), landing where they left.
//
// Order, and why it gives one process's numbers: on the expert's rank the rows of local expert l
// are the rows rank 0 sent for it, then rank 1's, ... (expert-major, sender-minor). When the one
// process's batch is the ranks' batches end to end (dist/batch_shard.h), moe_sort's stable order
// puts expert e's rows in exactly this order, so the grouped GEMM sees the same rows in the same
// order in both runs.
//
// Backward: the gradient of dispatch is a combine of the gradient with the same route, and the
// gradient of combine is a dispatch; the route (counts) is planned once per layer in forward.
//
// Both exchanges are split into a start (nonblocking MPI_Ialltoallv; other work may run before
// the wait) and a finish. The buffers must stay alive and untouched between the two.
//
// Shapes: M rows of width W on the sending side (the rank's routed rows, N tokens x top-k);
// R rows on the receiving side (R = the rows the group sends this rank).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/communicator.h"

namespace lj {

// Who sends what to whom for one layer, the same on every rank of the group after
// plan_expert_route.
struct ExpertRoute {
  int ranks = 1;                     // P, the expert-parallel group's size
  int64_t local_experts = 0;         // L = E / P
  std::vector<int64_t> send_rows;    // (P) rows this rank sends rank p (its rows of p's experts)
  std::vector<int64_t> recv_sizes;   // (P * L) [q L + l]: rows rank q sends for local expert l
  std::vector<int64_t> recv_rows;    // (P) rows from rank q, summed over l
  std::vector<int64_t> group_sizes;  // (L) rows of each local expert, summed over the senders
  int64_t rows_out() const;          // M: rows this rank sent
  int64_t rows_in() const;           // R: rows this rank receives
};

// Exchanges the group sizes (one all-to-all of P * L int64): `sizes` (E) is this rank's rows per
// expert, its rows sorted by expert. invalid_argument when E is not a multiple of the group's
// size or a size is negative; the communicator's errors.
StatusOr<ExpertRoute> plan_expert_route(Communicator& ep, std::span<const int64_t> sizes);
// The route from both sides' counts without communicating (what plan_expert_route exchanged,
// kept by the graph as ep_route's output): `sizes` (E) this rank's rows per expert, `recv_sizes`
// (E) [q L + l] the rows rank q sends for local expert l, over `ranks` ranks. invalid_argument
// when E does not split over the ranks, the two differ in length, or a count is negative.
StatusOr<ExpertRoute> expert_route(int ranks, std::span<const int64_t> sizes,
                                   std::span<const int64_t> recv_sizes);

// The row exchanges, each a start and a finish. `width`: elements per row (W).
class ExpertExchange {
 public:
  ExpertExchange(Communicator& ep, const ExpertRoute& route, int64_t width);

  // rows (M, W) sorted by expert -> staging (R, W), sender-major. Start, then finish into
  // out (R, W), grouped by local expert (expert-major, sender-minor). staging may not be out.
  CommHandle start_dispatch(std::span<const float> rows, std::span<float> staging);
  Status finish_dispatch(CommHandle& h, std::span<const float> staging, std::span<float> out);
  // The inverse: y (R, W) grouped by local expert -> rows (M, W) in this rank's sorted order.
  // The start reorders y into staging (R, W) sender-major and starts the all-to-all.
  CommHandle start_combine(std::span<const float> y, std::span<float> staging,
                           std::span<float> rows);
  Status finish_combine(CommHandle& h);

  // Blocking forms: start, then finish.
  Status dispatch(std::span<const float> rows, std::span<float> staging, std::span<float> out);
  Status combine(std::span<const float> y, std::span<float> staging, std::span<float> rows);

 private:
  // Copies R rows between sender-major and expert-major order (to_expert_major says which way).
  void reorder(std::span<const float> from, std::span<float> to, bool to_expert_major) const;
  std::vector<int64_t> elements(const std::vector<int64_t>& rows) const;

  Communicator& ep_;
  const ExpertRoute& route_;
  int64_t width_;
};

}  // namespace lj
