// The collective ops' table entries (graph/ops.def grad_reduce_start / grad_reduce_wait,
// param_gather_*, ep_route / ep_dispatch / ep_combine). A collective needs the run's communicator
// (and the gradients' their optimizer state), which no backend has: the trainer binds each node
// to its own kernel (train/grad_sync.h, train/expert_sync.h, Executor::set_node_kernel). These
// run only when nothing was bound, and say so; expert parallelism's exchange over one rank (the
// exchange with oneself: every row stays where it is) runs here. A dry run allocates their
// outputs without launching them.
#include <cstring>
#include <numeric>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

Status unbound_collective(KernelContext& c) {
  return internal_error(std::string(op_name(c.node.op)) +
                            " has no communicator: the graph's collectives were not bound",
                        "run data-parallel graphs through TrainStep (train/grad_sync.h)");
}

// The sizes as int64 (i32 or i64 input).
std::vector<int64_t> sizes_of(const TensorView& t) {
  std::vector<int64_t> s(static_cast<size_t>(t.numel()));
  dispatch_index(t.dtype, [&](auto tag) {
    using I = decltype(tag);
    for (size_t e = 0; e < s.size(); ++e) s[e] = static_cast<int64_t>(t.as<I>()[e]);
  });
  return s;
}

// ep_route over one rank: every row is its own.
Status ep_route_alone(KernelContext& c) {
  if (c.attrs().i("ranks") != 1) return unbound_collective(c);
  const std::vector<int64_t> s = sizes_of(c.in[0]);
  for (size_t e = 0; e < s.size(); ++e) {
    c.out[0].as<int32_t>()[e] = static_cast<int32_t>(s[e]);
    c.out[1].as<int32_t>()[e] = static_cast<int32_t>(s[e]);
  }
  return ok_status();
}

// ep_dispatch / ep_combine over one rank: the rows as they are (the capacity is M).
Status ep_exchange_alone(KernelContext& c) {
  if (c.attrs().i("ranks") != 1) return unbound_collective(c);
  const std::vector<int64_t> s = sizes_of(c.in[1]);
  const int64_t rows = c.in[0].dims[0];
  if (std::accumulate(s.begin(), s.end(), int64_t{0}) != rows || sizes_of(c.in[2]) != s) {
    return out_of_range(std::string(op_name(c.node.op)) + ": the group sizes do not route the " +
                            std::to_string(rows) + " rows",
                        "group_sizes must come from moe_sort and recv_sizes from ep_route");
  }
  std::memcpy(c.out[0].data, c.in[0].data, c.in[0].bytes());
  return ok_status();
}

}  // namespace

void register_collective(KernelTable& t) {
  t[Op::grad_reduce_start] = unbound_collective;
  t[Op::grad_reduce_wait] = unbound_collective;
  t[Op::param_gather_start] = unbound_collective;
  t[Op::param_gather_wait] = unbound_collective;
  t[Op::ep_route] = ep_route_alone;
  t[Op::ep_dispatch] = ep_exchange_alone;
  t[Op::ep_combine] = ep_exchange_alone;
}

}  // namespace lj::cpu
