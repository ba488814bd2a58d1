// The coefficients of the planner's memory and time models (the "coefficients file"): written by
// `ljperf calibrate`, read by `ljperf plan`. Defaults ship in the repository
// (data/predictor_coefficients.json) and are embedded in the binary (CMake generates the source
// holding that file's text), so the planner works from any directory.
#pragma once

#include <array>
#include <string>

#include "core/status.h"
#include "graph/op.h"

namespace lj {

inline constexpr int kPlanOpCategories = static_cast<int>(OpCategory::opaque) + 1;

// Measured profile of the CPU host the file was calibrated on.
struct HostProfile {
  std::string cpu;           // /proc/cpuinfo model name at calibration
  int threads = 0;           // threads the micro-runs used
  double gemm_flops = 0;     // sustained fp32 GEMM FLOP/s (matmul kernel)
  double mem_bandwidth = 0;  // sustained copy bandwidth, bytes/s (read + write)
  // What the peak RSS holds beyond everything priced from its causes (the allocator's blocks,
  // oneDNN's GEMM buffers, the measured process baseline): a fitted residual, near 0.
  double baseline_rss_bytes = 0;
  // Not in the file: the process baseline measured on this host (probe/host_baseline.h), set by
  // attach_host_baseline for a plan on this host; 0 until then.
  double process_baseline_bytes = 0;
  bool process_baseline_measured = false;
};

// The CPU process's peak resident set from the dry run's figures (plan/memory_model.h
// predict_cpu_memory):
//   rss = reserved_factor · allocator blocks' resident bytes (glibc-priced, malloc_policy.h)
//         + measured process baseline (probe/host_baseline.h) + baseline_rss_bytes (fitted
//         residual)
//         + per_node_bytes · graph_nodes + per_param_bytes · num_params
//         + gemm_buffer_factor · oneDNN's largest GEMM buffers (probe/sgemm_buffers.h), or, on
//         hosts
//           that model does not cover, gemm_pack_bytes · [a GEMM oneDNN packs]
// calibrate --results fits the residual (and the per-node term when asked); the factors stay 1.
struct CpuMemoryCoefficients {
  double reserved_factor = 1.0;
  double per_node_bytes = 0;
  double per_param_bytes = 0;
  // oneDNN's sgemm packs its B operand into per-thread buffers, outside ljperf's allocator,
  // for large GEMMs (on this host: small's LM head once a micro-batch has more than 384 tokens,
  // a step of ~21 MiB with 2 threads).
  double gemm_pack_bytes = 0;
  double gemm_buffer_factor = 1.0;
};

// GPU runtime overheads (per rank) on top of the dry run and the ZeRO model states.
struct GpuMemoryCoefficients {
  double cuda_context_bytes = 0;  // driver + CUDA context + kernel images
  double fragmentation = 1.0;     // multiplies the allocator's reserved peak
  double workspace_bytes = 0;     // cuBLAS/cuBLASLt + attention workspaces
};

// Achieved fraction of peak per op category (index: OpCategory), and of memory bandwidth.
struct Efficiency {
  std::array<double, kPlanOpCategories> compute{};
  double bandwidth = 1.0;
};

struct PredictorCoefficients {
  std::string source = "embedded defaults";  // where it was read from
  HostProfile host;
  CpuMemoryCoefficients cpu_memory;
  GpuMemoryCoefficients gpu_memory;
  Efficiency cpu_eff;
  // Read and written for older files, but no longer what GPU plans are priced by: the GPU step
  // time comes from plan/gpu_time_model.h, fitted on published runs (issue 37).
  Efficiency gpu_eff;
  double comm_efficiency = 0.8;  // achieved fraction of the link bandwidth in collectives
  bool comm_overlap = true;      // ZeRO collectives overlap compute (DeepSpeed overlap_comm)
  int fitted_records = 0;        // result records the CPU memory coefficients were fitted on

  std::string to_json() const;
};

StatusOr<PredictorCoefficients> parse_coefficients(const std::string& json_text,
                                                   const std::string& source);
// The defaults compiled into the binary (same text as data/predictor_coefficients.json).
const std::string& default_coefficients_text();
PredictorCoefficients default_coefficients();

// $XDG_CONFIG_HOME/ljperf/predictor_coefficients.json, else
// $HOME/.config/ljperf/predictor_coefficients.json. load_coefficients also reads the name
// earlier versions wrote there, plan_model.json.
std::string default_coefficients_path();
// The file at `path` when given; else the default path when that file exists; else the
// embedded defaults. An unreadable or invalid file is an error.
StatusOr<PredictorCoefficients> load_coefficients(const std::string& path = "");
Status save_coefficients(const PredictorCoefficients& m, const std::string& path);

// Fills coeffs->host.process_baseline_bytes (and process_baseline_measured) for a plan on this
// host, from probe/host_baseline.h's host_baseline (cached, or measured when `may_probe`). A
// baseline that cannot be had logs a warning and leaves them 0: the prediction is then low by it.
Status attach_host_baseline(PredictorCoefficients* coeffs, int threads = 0, bool may_probe = true);

}  // namespace lj
