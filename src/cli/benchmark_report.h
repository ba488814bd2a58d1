// What `ljperf benchmark` says about a run: the header before the steps, the summary after them
// (throughput, MFU, step times, memory measured against predicted, per rank under mpirun) and the
// JSON record appended to --out (one object per run, whole lines only: io/jsonl.h). The CPU and
// the GPU routes each have theirs; tests and users parse both, so their text is kept as it is.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "cli/benchmark.h"
#include "cli/benchmark_loop.h"
#include "cli/dist_session.h"
#include "cli/mfu_peak.h"
#include "core/status.h"
#include "plan/host_plan.h"
#include "runtime/host.h"
#include "train/gpu_train.h"
#include "train/train_step.h"

namespace lj::cli {

// The run's figures, as printed and recorded. With several ranks: throughput summed over the
// ranks, and per-rank lists (rank order) gathered to every rank.
struct Summary {
  double p50 = 0, p90 = 0;  // this rank's step seconds
  // All ranks: the sum of the ranks' tokens/s (each its tokens per step over its median step).
  double tokens_per_s = 0, tflops = 0, mfu = 0, flops_per_token = 0, peak_flops = 0;
  std::string peak_name;  // the MFU denominator, named ("232.1 GFLOP/s fp32, measured")
  double rss = 0;         // this process's peak RSS (VmHWM)
  double comm_s = 0;      // this rank's median time in collectives per measured step
  double exposed_s = 0;   // ... of which the step waited for (median)
  int64_t kernels_per_step = 0;
  // One process only (else 0 and NaN: the other ranks are other processes too): the MFU over the
  // median step's CPU time per thread rather than its wall time, and what other processes and
  // the hypervisor (steal) held of the cores' time over the measured steps (runtime/cpu_load.h).
  double mfu_cpu = 0;
  double host_other_share = std::numeric_limits<double>::quiet_NaN();
  double host_steal_share = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> tokens_per_s_by_rank, rss_by_rank, comm_s_by_rank, exposed_s_by_rank,
      optimizer_bytes_by_rank;
  // Each rank's own predicted peak (ranks differ: which part of each bucket they receive, and
  // the MPI library's temporaries, dist/zero.h).
  std::vector<double> predicted_by_rank;
  // The share of the communication hidden behind compute: 1 - exposed / comm.
  double overlapped_share() const {
    return comm_s > 0 ? std::max(0.0, 1.0 - exposed_s / comm_s) : 0;
  }
};

// The CPU route's run, as the report reads it.
struct CpuRun {
  const Resolved& r;
  const HostInfo& host;
  const PreparedRun& prepared;  // the dry run, the prediction and the time model's rates
  const Device& dev;
  TrainStep& trainer;
  double compile_s = 0;   // building the graph and the step
  std::string recompute;  // "none", "full", ... (RecomputeConfig::to_string)
};

// The lines before the first step: model, batch, configuration, host, ZeRO, compile.
void print_header(const CpuRun& run);

// A collective with several ranks: every rank calls it.
StatusOr<Summary> summarize(const CpuRun& run, const MfuPeak& peak, const StepLog& log,
                            DistSession& dist);

// "summary: ..." and its lines; `rates_note`: why the time model's rates may read slow.
void print_summary(const BenchmarkArgs& a, const CpuRun& run, const StepLog& log, const Summary& m,
                   const std::string& rates_note);

// One JSON object per run, appended to a.output.
Status append_results(const BenchmarkArgs& a, const CpuRun& run, const StepLog& log,
                      const Summary& m);

// The GPU route's run: one GPU per rank (`world` ranks), its batches, the device's report.
struct GpuRun {
  const Resolved& r;
  int world = 1;
  GpuReport gpu;
};

// "ljperf benchmark on the GPU: ..." before the step is built.
void print_gpu_header(const GpuRun& run);

// The GPU's summary; with a non-empty `output` (rank 0's --out), its JSON record appended there.
Status report_gpu_run(const GpuRun& run, const StepLog& log, const std::string& output);

}  // namespace lj::cli
