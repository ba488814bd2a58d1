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
  std::string cpu;                // /proc/cpuinfo model name at calibration
  int threads = 0;                // threads the micro-runs used
  double gemm_flops = 0;          // sustained fp32 GEMM FLOP/s (matmul kernel)
  double mem_bandwidth = 0;       // sustained copy bandwidth, bytes/s (read + write)
  double baseline_rss_bytes = 0;  // the process before it allocates tensors (binary, libraries,
                                  // OpenMP thread stacks)
};

// The CPU process's peak resident set, as a linear model of the dry run's figures:
//   rss = reserved_factor · allocator_reserved_peak + baseline_rss_bytes
//         + per_node_bytes · graph_nodes + per_param_bytes · num_params
//         + gemm_pack_bytes · [the step has a GEMM oneDNN packs, GraphFigures::gemm_packing]
// (baseline in HostProfile). Fitted by `ljperf calibrate --results`.
struct CpuMemoryCoefficients {
  double reserved_factor = 1.0;
  double per_node_bytes = 0;
  double per_param_bytes = 0;
  // oneDNN's sgemm packs its B operand into per-thread buffers, outside ljperf's allocator,
  // for large GEMMs (on this host: small's LM head once a micro-batch has more than 384 tokens,
  // a step of ~21 MiB with 2 threads).
  double gemm_pack_bytes = 0;
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

}  // namespace lj
