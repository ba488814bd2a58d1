// Shared console formatting of training progress.
#pragma once

#include <string>
#include <vector>

#include "runtime/executor.h"

namespace lj::cli {

struct StepLine {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double memory_bytes = 0;        // the process's peak resident set (what the OS sees)
  double memory_total_bytes = 0;  // what the percentage is of
  double tokens_per_s = 0;
  double flops_per_token = 0;
  double peak_flops = 0;
  double lr = -1;  // the step's learning rate (train); < 0: not printed (benchmark)
};

// torchtitan's line: "step: N  loss: L  grad_norm: G  memory: X GiB(P%)  tps: T  tflops: F  mfu:
// M%", with "  lr: 3.0e-04" after grad_norm when s.lr is given.
std::string torchtitan_line(const StepLine& s);

// What the step spends outside executor kernels, summed over the profiled steps.
struct HostTimes {
  double optimizer_seconds = 0;  // grad norm, clipping, AdamW (StepResult::optimizer_seconds)
  double step_seconds = 0;       // whole steps, wall time
  int64_t steps = 0;             // optimizer steps (an accumulated step runs several graphs)
};

// Kernel time per step by op category and phase, from an executor profile accumulated over
// `steps` graph runs: a table with calls, milliseconds and GFLOP/s per category; then the
// optimizer on the host (its own row, in the opt column) and the rest of the step outside any
// kernel (the executor between kernels, data, the trainer), per optimizer step.
std::string profile_table(const std::vector<OpProfile>& profile, int64_t steps,
                          const HostTimes& host = {});

// The MFU a step would reach if the kernels of the products the MFU counts were all it ran, at
// the speed they ran in it: the contraction kernels (the GEMMs, the fused LM head) and attention
// (the 12·L·H·Q·T term). mfu * step_seconds / (their seconds per step): what this host's
// matrix products allow, whatever the rest of the step costs, the ceiling of the step's MFU.
// Attention counts since session 23: without it the figure read 109.7% for the wide model at
// bf16 and T = 2048, where attention was 24% of the step. The profile is summed over `steps`
// optimizer steps; 0 when it holds neither.
double gemm_bound_mfu(const std::vector<OpProfile>& profile, int64_t steps, double mfu,
                      double step_seconds);

// Peak resident set size of this process (VmHWM), in bytes; 0 when unknown.
long long process_peak_rss_bytes();

}  // namespace lj::cli
