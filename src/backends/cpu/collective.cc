// The collective ops' table entries (graph/ops.def grad_reduce_start / grad_reduce_wait). A
// collective needs the run's communicator and optimizer state, which no backend has: the trainer
// binds each node to its own kernel (train/grad_sync.h, Executor::set_node_kernel). These run only
// when nothing was bound, and say so. A dry run allocates their outputs without launching them.
#include "backends/cpu/cpu.h"

namespace lj::cpu {
namespace {

Status unbound_collective(KernelContext& c) {
  return internal_error(std::string(op_name(c.node.op)) +
                            " has no communicator: the graph's collectives were not bound",
                        "run data-parallel graphs through TrainStep (train/grad_sync.h)");
}

}  // namespace

void register_collective(KernelTable& t) {
  t[Op::grad_reduce_start] = unbound_collective;
  t[Op::grad_reduce_wait] = unbound_collective;
  t[Op::param_gather_start] = unbound_collective;
  t[Op::param_gather_wait] = unbound_collective;
}

}  // namespace lj::cpu
