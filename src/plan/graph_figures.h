// The one dry run of a training step (docs/architecture.md, "Memory and recompute"): the joint
// graph is replayed on a virtual device (runtime Executor::dry_run), so the memory figure is the
// caching allocator's exact peak for that schedule, plus the parameters and, when asked, AdamW's
// states. With GraphOptions::compile the executor runs planned: the figure is the static memory
// plan's arena (held for the whole step, by category as at the plan's peak) plus everything outside
// it. Kernel scratch and the process itself (binary, libraries, thread stacks) are not included;
// memory_model.h adds those. Also the predicted compute time of every node (time_model.h), for
// the planner.
#pragma once

#include <cstdint>
#include <optional>

#include "dist/zero.h"
#include "graph/ir.h"
#include "models/config.h"
#include "passes/memory_plan/memory_plan.h"
#include "passes/pipeline/train_graph.h"
#include "plan/coefficients.h"
#include "plan/device_catalog.h"
#include "plan/time_model.h"
#include "probe/comm_rates.h"
#include "runtime/memory.h"

namespace lj {

struct GraphFigures {
  MemoryStats stats;               // dry run: per category, peaks, reserved
  int64_t bytes_peak = 0;          // stats.bytes_total_peak: total at peak
  int64_t bytes_reserved = 0;      // stats.bytes_reserved_peak: held by the allocator at peak
  std::optional<MemoryPlan> plan;  // compile only: the static plan (arena, naive, peak live)
  int64_t nodes = 0;               // nodes of the joint graph
  double compute_seconds = 0;      // time model over every node (time_model.h)
  // With DryRunOptions::rates: the CPU step by category (time_model.h host_step_times), the
  // optimizer for this rank's parameters included; compute_seconds is then its total.
  std::optional<StepTimes> times;
  // GPU devices: the step's work (time_model.h gpu_step_work), which plan/gpu_time_model.h
  // prices.
  std::optional<GpuStepWork> gpu_work;
  // A forward GEMM that oneDNN's sgemm packs into its own per-thread buffers (outside the
  // allocator): more than kGemmPackRows output rows and a B operand (N·K) of at least
  // kGemmPackElements. Thresholds measured on this host (libdnnl 2.6, 2 threads): the LM head of
  // `small` (N 32000, K 288) adds ~14 MiB of peak RSS at 400 rows and above, nothing at 384;
  // the backward GEMMs of the same shapes and the FFN GEMMs (N·K 221K) add nothing. Compiled,
  // the LM head is inside linear_cross_entropy (256-row chunks, which do not pack in isolation),
  // yet the process shows the same step above 384 rows (17 MiB over the reserved peak at 384,
  // 25-34 MiB at 448-2048; source not pinned down): the fused loss counts with all its rows.
  bool gemm_packing = false;
  // oneDNN's largest GEMM buffers in the step (probe/sgemm_buffers.h), resident bytes; -1 where
  // the model does not cover this host's oneDNN kernels (then gemm_packing stands in).
  int64_t gemm_buffer_bytes = -1;
};
inline constexpr int64_t kGemmPackRows = 384;
inline constexpr int64_t kGemmPackElements = int64_t{1} << 21;

// What the dry run allocates beside the graph, and how its nodes are timed.
struct DryRunOptions {
  // AdamW's m and v in f32 (the CPU's case); GPU plans partition them instead.
  bool with_adam_states = true;
  // With `eff`: GraphFigures::compute_seconds by the time model; null leaves it 0.
  const DeviceProfile* device = nullptr;
  Efficiency eff;
  // The CPU's data parallelism (with_adam_states only): with world_size > 1 the dry run holds
  // what one rank of train/zero_optimizer.h holds (dist/zero.h zero_memory: m and v for the
  // rank's padded shard at stages 1-2, stage 2's gradient shard) and, after backward, replays
  // the optimizer step's collective buffers (and stage 2 freeing the full gradients) on the
  // same allocator, so the peak is the rank's over the whole step. world_size 1: one process,
  // plain AdamW, nothing else (the stage has no effect).
  int world_size = 1;
  int rank = 0;  // the rank priced: MPI's temporaries differ by rank (plan/mpi_temporaries.h)
  ZeroConfig zero = {};
  // The MPI library's own temporaries while it reduces a gradient bucket, outside ljperf's
  // allocator (plan/mpi_temporaries.h: Open MPI 4.1's, by rank). Off: the dry run
  // holds exactly what ljperf's own accounting sees.
  bool mpi_temporaries = true;
  // The threads the step's GEMMs run on (oneDNN's buffers are per thread); 0: all.
  int threads = 0;
  // This host's measured rates (probe/host_rates.h): the step is priced by host_step_times, and the
  // GEMM classes the graph needs that `rates` lacks are measured first (and cached) when
  // measure_gemm_classes is set, else taken from the nearest measured class.
  HostRates* rates = nullptr;
  bool measure_gemm_classes = false;
  // With `rates`: this host's measured MPI collectives for world_size ranks (probe/comm_rates.h),
  // which price the graph's collectives and stages 1-2's gather of the updated parameters; null:
  // they cost nothing.
  const CommRates* comm = nullptr;
  // Kernel scratch as the CUDA kernels ask for it (runtime/executor.h cuda_workspace_sizes: Di of
  // the attention backward, the loss kernels' rows) instead of the CPU kernels' (per-thread tiles,
  // f32 copies of bf16 operands): the GPU plans.
  bool cuda_workspace = false;
};

// Builds the joint graph for `options` and dry-runs it with micro-batch `batch` and sequence
// `seq_len`. Inputs are allocated as the trainer does: tokens, targets, rope tables, the
// parameters in options.dtype, then AdamW's m and v (DryRunOptions::with_adam_states).
StatusOr<GraphFigures> graph_figures(const LlamaConfig& model, int64_t batch, int64_t seq_len,
                                     const GraphOptions& options = {},
                                     const DryRunOptions& dry = {});
// The same for a joint graph already built with build_train_graph(model, options): a caller that
// also runs or prices the graph builds it once.
StatusOr<GraphFigures> graph_figures(const Graph& joint, const LlamaConfig& model, int64_t batch,
                                     int64_t seq_len, const GraphOptions& options,
                                     const DryRunOptions& dry = {});

}  // namespace lj
