// The CUDA executor: runs a graph's nodes in order on one GPU (backends/cuda), each by its CUDA
// kernel on the context's stream (the node loop is runtime/node_loop.h's; this file is the
// CUDA's NodeBackend around it). Values live in device buffers from the context's caching
// allocator and are freed after their last use (stream-ordered: the one stream makes reuse
// safe); reshape outputs alias their input. Compiled graphs' fused_pointwise nodes run the
// NVRTC-compiled kernels of the CUDA renderer, loaded once in prepare(). Built with LJ_CUDA only.
//
// Planned mode (compiled runs, as on the CPU): every node output lives at its offset in one
// device arena per shape laid out by the static memory plan (passes/memory_plan); plans are
// cached by the bound symbols, and a run reuses the last arena unless a caller still holds an
// output of it (outputs share ownership of their arena).
//
// CUDA graphs (planned mode, set_cuda_graphs(true)): a run whose input pointers and arena are
// those of the run before it is captured (cudaStreamBeginCapture) and instantiated, and every
// later run with the same pointers replays it with one cudaGraphLaunch instead of one launch per
// kernel. The first run of a shape stays eager: it warms the caching allocator, cuBLASLt's
// heuristics and the modules' lazy loading. Captured runs do not check ids on the device (that
// would synchronise): the caller checks token ids and labels on the host. Kernel scratch and
// buffers made during the capture are kept for the graph's lifetime, since it holds their
// addresses. A capture that fails (an operation that cannot be captured) is logged once and the
// executor stays eager. A caller that still holds outputs of the last replay gets an eager run.
//
// Overlap (set_output_ready): the caller is told as soon as each graph output's kernel is queued,
// while the rest of the graph is still being launched, e.g. to start reducing a gradient bucket
// on another stream as backward goes on (train/cuda/). Runs with that hook are never captured.
//
// Not yet (issue 16's note): host callbacks (opaque: a graph break fails here).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/fused.h"
#include "graph/ir.h"
#include "passes/memory_plan/memory_plan.h"
#include "runtime/cuda/replay_key.h"
#include "runtime/node_loop.h"

namespace lj {

// A device tensor: dense row-major, owned through `storage` (shared by reshape aliases).
struct DeviceTensor {
  std::shared_ptr<void> storage;
  DType dtype = DType::f32;
  std::vector<int64_t> dims;
  void* data() const { return storage.get(); }
  size_t bytes() const {
    return static_cast<size_t>(numel_of(dims)) * static_cast<size_t>(dtype_size(dtype));
  }
};

// A new device buffer of `bytes` from ctx's allocator, returned to it when the last owner goes.
StatusOr<DeviceTensor> device_empty(cuda::Context& ctx, DType dtype, std::vector<int64_t> dims);
// Host bytes in, host bytes out (synchronous).
StatusOr<DeviceTensor> device_from_host(cuda::Context& ctx, DType dtype, std::vector<int64_t> dims,
                                        const void* host);
Status device_to_host(const DeviceTensor& t, void* host);

class CudaExecutor {
 public:
  // planned: the static memory plan's arena instead of the caching allocator for node outputs.
  CudaExecutor(const Graph& g, cuda::Context& ctx, bool planned = false);
  // Compiles (NVRTC, through `cache`) and loads the graph's fused kernels; needed once before
  // run() when the graph has fused_pointwise nodes.
  Status prepare(codegen::CudaKernelCache& cache);
  // Binds symbols from the inputs' dims, runs, returns the graph outputs in order (asynchronous:
  // synchronise the context before reading them on the host).
  StatusOr<std::vector<DeviceTensor>> run(std::span<const DeviceTensor> inputs);
  int64_t kernels_launched() const { return kernels_launched_; }
  // Capture and replay runs as CUDA graphs (planned mode only; see above). Off by default.
  void set_cuda_graphs(bool on) { graphs_ = on; }
  // Runs served by replaying a captured graph, and whether a capture failed (then all eager).
  int64_t graph_replays() const { return graph_replays_; }
  bool graph_capture_failed() const { return capture_failed_; }
  // Called in run() right after the kernel that makes graph output `index` is queued (not
  // finished: work on the value must be ordered after the stream's). An error ends the run.
  // While set, runs launch kernel by kernel (no CUDA graph capture or replay). Empty: none.
  using OutputReady = std::function<Status(size_t index, const DeviceTensor& value)>;
  void set_output_ready(OutputReady hook) { output_ready_ = std::move(hook); }
  // Planned mode: the bytes of the largest arena held so far (0 in eager mode).
  int64_t arena_bytes_peak() const { return arena_bytes_peak_; }

 private:
  // Planned mode: the plan for env (made once per shape) and an arena for this run.
  Status prepare_arena(const SymEnv& env);
  // Every node in order. `keep` (capture): every buffer made from the caching allocator is
  // appended there instead of being returned to the cache, and ids are not checked on the device.
  StatusOr<std::vector<DeviceTensor>> run_nodes(const SymEnv& env,
                                                std::span<const DeviceTensor> inputs,
                                                std::vector<std::shared_ptr<void>>* keep);
  // What identifies a run for replay (runtime/cuda/replay_key.h): the inputs' addresses, dtypes
  // and shapes, the symbolic sizes, the arena's address and size.
  ReplayKey signature(const SymEnv& env, std::span<const DeviceTensor> inputs) const;
  // Captures the node loop into a CUDA graph and launches it; false (and eager from then on) when
  // the capture fails.
  StatusOr<bool> capture(const SymEnv& env, std::span<const DeviceTensor> inputs,
                         std::vector<DeviceTensor>* out);
  // The captured run's outputs as tensors (arena views and kept buffers); false when a caller
  // still holds one of the last replay's (then it must not be overwritten).
  bool replay_outputs(std::vector<DeviceTensor>* out) const;
  struct Captured;
  class Nodes;  // the CUDA's NodeBackend (cuda_executor.cc)
  const Graph& g_;
  cuda::Context& ctx_;
  ValueLifetimes life_;
  std::vector<std::vector<size_t>> output_indices_;  // per value: the graph outputs it is
  OutputReady output_ready_;
  std::unique_ptr<cuda::FusedKernels> fused_;
  std::vector<int> fused_index_;  // per node: its kernel in fused_, -1 none
  int64_t kernels_launched_ = 0;
  bool planned_ = false;
  std::vector<std::unique_ptr<MemoryPlan>> plans_;
  const MemoryPlan* plan_ = nullptr;
  std::shared_ptr<cuda::Arena> arena_;
  int64_t arena_bytes_peak_ = 0;
  bool graphs_ = false;
  bool capture_failed_ = false;
  int64_t graph_replays_ = 0;
  ReplayKey last_signature_;
  std::shared_ptr<Captured> captured_;
};

}  // namespace lj
