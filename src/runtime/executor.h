// The eager executor: runs a graph's nodes in order, one kernel each, on the CPU backend (the
// node loop is runtime/node_loop.h's; this file is the CPU's NodeBackend around it).
// Buffers come from the device's caching allocator and are freed right after their last use;
// reshape outputs alias their input. Every allocation is counted under a category:
//   inputs                       -> whatever the caller allocated them as (weights, ...)
//   forward values read by a backward node -> activations
//   backward/optimizer values that are graph outputs -> grads / optimizer
//   everything else              -> temporaries;  kernel scratch -> workspace (one reused buffer)
// Planned mode (ExecutorOptions::planned, compiled runs): values live at the static memory
// plan's offsets in one arena per shape instead (runtime/arena_memory.h), counted the same way.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "graph/ir.h"
#include "runtime/arena_memory.h"
#include "runtime/node_loop.h"
#include "runtime/tensor.h"

namespace lj {

struct OpProfile {
  Op op;
  Phase phase;
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
};

struct ExecutorOptions {
  bool profile = false;  // time every kernel (adds a clock read per node)
  // With profile: time kernels in process CPU time / threads instead of wall time (another
  // process on the cores stretches wall time, not CPU time; on a quiet host they agree).
  bool profile_cpu = false;
  // Static memory plan (compiled mode): every value gets its planned place in one arena per
  // shape (runtime/arena_memory.h) instead of a caching-allocator block.
  bool planned = false;
  // Dry runs: each kernel's scratch as this table's `ws` says (ops it lacks ask for none)
  // instead of the CPU kernels'. The GPU memory prediction passes the CUDA kernels' sizes
  // (cuda_workspace_sizes). Runs ignore it.
  const KernelTable* dry_workspace_sizes = nullptr;
};

// The CUDA kernels' scratch by op (backends/cuda/workspace.h workspace_sizes, plain C++ in builds
// with and without CUDA), for dry_workspace_sizes: what a GPU memory prediction dry-runs with.
const KernelTable& cuda_workspace_sizes();

class Executor {
 public:
  Executor(const Graph& g, Device& dev, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Binds symbols from the inputs' shapes (an input declared (B, T) fed (4, 256) binds B=4,
  // T=256), checks every input against its declared dtype and shape, runs, and returns the
  // graph outputs in order. `inputs` follow g.inputs().
  StatusOr<std::vector<Tensor>> run(std::span<const Tensor> inputs);
  // Allocates and frees exactly as run() does but launches no kernel: on a virtual Device this
  // gives the run's memory (peak and by category) without allocating it, kernel workspace
  // included (from the backend's WorkspaceFn of each op).
  StatusOr<std::vector<Tensor>> dry_run(std::span<const Tensor> inputs);

  // Symbols bound by the last run.
  const SymEnv& env() const { return env_; }
  // Kernels launched by the last run (nodes that are not inputs or aliases).
  int64_t kernels_launched() const { return kernels_launched_; }
  // Accumulated per (op, phase) when options.profile is set.
  const std::vector<OpProfile>& profile() const { return profile_; }
  void reset_profile() { profile_.clear(); }
  // Planned mode: the plan of the last run's shape and the plan cache; nullptr in eager mode.
  const ArenaMemory* arena_memory() const { return planned_.get(); }

  // A kernel for one node (by index in g.nodes()) that replaces the backend table's, e.g. a
  // compiled fused kernel (runtime/fused_kernels.h). Set before run(); an empty one clears it.
  using NodeKernel = std::function<Status(KernelContext&)>;
  void set_node_kernel(size_t node_index, NodeKernel k);
  // Called after every kernel run() launches (not in dry runs); empty: nothing. How a
  // nonblocking collective started by one node makes progress while later nodes compute
  // (train/grad_sync.h polls its in-flight reductions here).
  void set_after_kernel(std::function<void()> fn) { after_kernel_ = std::move(fn); }
  // Called in dry runs where run() would launch node `node_index`'s kernel (its outputs exist,
  // its inputs not yet freed); empty: nothing. What a bound kernel allocates by itself is
  // replayed here on the dry run's device (plan/graph_figures.cc: train/grad_sync.h's gradient
  // shard at its first reduction, the MPI library's temporaries of a collective).
  void set_dry_node_hook(std::function<void(size_t node_index)> fn) { dry_hook_ = std::move(fn); }

 private:
  class Nodes;  // the CPU's NodeBackend (executor.cc)
  void dry_workspace(size_t bytes);
  StatusOr<std::vector<Tensor>> execute(std::span<const Tensor> inputs, bool launch);
  Status launch_kernel(const Node& n, const NodeKernel& fn, std::span<const TensorView> in,
                       std::span<TensorView> out);

  const Graph& g_;
  Device& dev_;
  ExecutorOptions options_;
  std::vector<MemCategory> category_;  // per value
  ValueLifetimes life_;
  SymEnv env_;
  int64_t kernels_launched_ = 0;
  std::vector<OpProfile> profile_;
  std::unique_ptr<ArenaMemory> planned_;  // options_.planned only
  void* workspace_ = nullptr;             // kernel scratch, see ArenaWorkspace in executor.cc
  size_t workspace_bytes_ = 0;
  std::vector<NodeKernel> node_kernels_;  // per node index; empty: the backend's kernel
  std::function<void()> after_kernel_;
  std::function<void(size_t)> dry_hook_;
};

}  // namespace lj
