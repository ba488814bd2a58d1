// The run-time side of expert parallelism's token exchange in the joint graph (graph/ops.def
// ep_route, ep_dispatch, ep_combine; models/moe.cc builds them for an ExpertShard of N > 1 ranks):
// binds every such node of a graph to the expert-parallel group's communicator
// (Executor::set_node_kernel), as train/grad_sync.h binds the gradient collectives.
//
// Each node is one collective, started and finished inside its kernel (dist/expert_exchange.h):
// ep_route all-to-alls the per-expert row counts, ep_dispatch sends each rank's sorted rows to
// their expert's rank (and zeroes the receive buffer past the rows that came), ep_combine sends
// them back. Forward and backward call them in the same order on every rank of the group, since
// every rank runs the same graph. A peer that dies or hangs ends the job within the
// communicator's timeout (--comm-timeout). A test hook for tests/e2e/dist_moe_test.sh:
// LJ_TEST_KILL_AT=dispatch:N:R makes rank R of the group kill itself (SIGKILL) as it starts its
// N-th dispatch (counted from 1 over the run), while its peers enter the same all-to-all.
#pragma once

#include <vector>

#include "dist/communicator.h"
#include "graph/ir.h"
#include "runtime/executor.h"

namespace lj {

class ExpertSync {
 public:
  // Binds the exchange nodes of `g` on `ex` to `ep` (their ranks attribute must be its size).
  // g, ex and ep must outlive this, and this must outlive every run of ex.
  ExpertSync(const Graph& g, Executor& ex, Communicator& ep);

  int64_t nodes() const { return nodes_; }  // exchange nodes bound

 private:
  Status route(KernelContext& c);
  Status dispatch(KernelContext& c);
  Status combine(KernelContext& c);

  Communicator& ep_;
  std::vector<float> staging_;  // the rows as they travel (sender-major), reused
  int64_t nodes_ = 0;
  int64_t dispatches_ = 0;  // ep_dispatch kernels run (forward and backward)
  int64_t kill_at_ = -1;    // the test hook's dispatch (LJ_TEST_KILL_AT=dispatch:N:R); -1: none
};

}  // namespace lj
