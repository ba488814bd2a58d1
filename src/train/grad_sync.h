// The run-time side of the gradient collectives that passes/collectives/grad_sync.h places in
// the joint graph: binds every grad_reduce_start / grad_reduce_wait node of a graph to a
// communicator (Executor::set_node_kernel) and polls the reductions in flight between kernels
// (Executor::set_after_kernel), which is how a nonblocking MPI collective progresses while
// backward computes: Open MPI moves a nonblocking collective's rounds on only inside MPI calls,
// and one MPI_Test per kernel is such a call.
//
// Per micro-batch (begin_micro_batch), with gradient accumulation over `count` micro-batches:
//   stages 0, 1: the earlier micro-batches only pass their gradients through the buffer (no
//     communication; TrainStep accumulates them); the last one packs (accumulated + its own)
//     times 1 / count, all-reduces the bucket and its wait gives sum / world: the averaged
//     gradients, with the float operations of the one-process path in the same order.
//   stage 2: every micro-batch reduce-scatters its bucket in place (DeepSpeed's stage 2 does the
//     same), and the wait adds this rank's part into the optimizer's gradient shard; after the
//     last, the shard is scaled by 1 / count and by 1 / world. Full gradients never outlive their
//     bucket's start.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "dist/communicator.h"
#include "dist/zero.h"
#include "graph/ir.h"
#include "runtime/executor.h"

namespace lj {

// Time in the bucket collectives of one step.
struct GradSyncTimes {
  // Wall time from each bucket's start (its packing included) until its completion was seen
  // (by a poll between kernels or by its wait), plus its unpacking, summed over buckets: how
  // long the communication took. Completion is seen at the next kernel boundary at the latest,
  // so this is an upper bound by up to one kernel per bucket.
  double comm_seconds = 0;
  // Wall time the step spent inside the collective nodes and polls (packing, starting, blocking
  // in waits, unpacking): the part of the communication compute did not hide.
  double exposed_seconds = 0;
  int64_t buckets = 0;  // reductions started
};

class GradSync {
 public:
  // Binds the collective nodes of `g` on `ex`. `layout`: the flat vector of the run's parameters
  // (its world size is comm's). Both g and ex must outlive this, and this must outlive every
  // run of ex. A graph without collectives binds nothing (active() false).
  GradSync(const Graph& g, Executor& ex, Communicator& comm, const FlatLayout& layout);

  bool active() const { return !buckets_.empty() || !gathers_.empty(); }
  // Stages 2, 3: the reduced gradients land in the optimizer's shard (core/zero_config.h).
  bool shards_gradients() const { return zero_shards(stage_, ZeroSharded::gradients); }
  // Before the forward_backward of micro-batch `index` of `count`. acc (stages 0, 1): the
  // gradients accumulated over micro-batches 0 .. index - 1 (one per parameter; null for the
  // first). shard (stages 2, 3): shard(begin, count) gives elements [begin, begin + count) of
  // the optimizer's gradient shard (ZeroOptimizer::grad_part), called at each bucket's wait, so
  // each bucket's part is allocated only when its reduction lands (the shard does not exist
  // during forward, and grows over backward as the gradients it replaces are freed).
  void begin_micro_batch(int index, int count, const std::vector<Tensor>* acc,
                         std::function<float*(int64_t begin, int64_t count)> shard);
  // The times since the last call.
  GradSyncTimes take_times();

 private:
  struct Bucket {
    int64_t param_begin = 0, param_end = 0, flat_begin = 0, flat_end = 0;
    int64_t recv_begin = 0, recv_count = 0;
    std::vector<int64_t> counts;  // stage 2: elements of the bucket in each rank's shard
    CommHandle handle;
    bool in_flight = false;
    double started_at = 0;
  };
  // Stage 3: one parameter's all-gather (param_gather_start / _wait), keyed by its buffer.
  struct Gather {
    std::vector<int64_t> counts;  // elements of the parameter in each rank's shard
    int64_t send_begin = 0;       // where this rank's part starts in its shard
    CommHandle handle;
    bool in_flight = false;
    double started_at = 0;
  };
  Status start(Bucket& b, KernelContext& c);
  Status wait(Bucket& b, KernelContext& c);
  Status start_gather(Gather& a, KernelContext& c);
  Status wait_gather(Gather& a, KernelContext& c);
  void completed(Gather& a, double now);
  void poll();
  void completed(Bucket& b, double now);

  Communicator& comm_;
  const FlatLayout& layout_;
  int stage_ = 0;
  std::vector<Bucket> buckets_;                  // by the nodes' bucket attribute
  std::unordered_map<ValueId, Gather> gathers_;  // by the start's output (the buffer)
  int index_ = 0, count_ = 1;
  const std::vector<Tensor>* acc_ = nullptr;
  std::function<float*(int64_t, int64_t)> shard_fn_;
  int in_flight_ = 0;
  GradSyncTimes times_;
};

}  // namespace lj
