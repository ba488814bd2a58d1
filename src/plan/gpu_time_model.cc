#include "plan/gpu_time_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "plan/gpu_collectives.h"

namespace lj {

namespace {

// Fitted by bench/plan/published/fit.py on the 13 rows of split "fit" in
// bench/plan/published/rows.tsv (squared log error of tokens/s/GPU, coordinate descent):
//   gemm_efficiency   h100: tt-h100-8b-8g, tt-h100-8b-128g-compile, fms-h100-7b,
//                     fms-h100-70b-full (0.478; torchtitan's H100s are 500 W HBM2e parts, fms's
//                     the 80 GB SXM: one figure for both);
//                     a100: the 9 A100 fit rows (tt-a100-*, fms-a100-*, ttune-a100-*) (0.671)
//   attention_*       held in the published range and fitted inside it: A100 FlashAttention-2
//                     50-73% of peak (Dao 2023, arXiv:2307.08691) -> 0.73, the range's top; H100
//                     FlashAttention-2 at most 35% (Shah et al. 2024, arXiv:2407.08608) and
//                     PyTorch SDPA forward 288 TFLOP/s at T 8192, D 128 (pytorch/benchmark
//                     d5f0a12, PR #2296; 0.29) -> range 0.25-0.35, fitted 0.25. Forward and
//                     backward held equal (no published backward figure read).
//   hbm_efficiency    all 13 fit rows, one figure for both GPUs (0.553)
//   kernel_seconds    not fitted: 5 us, a CUDA launch (eager steps launch ~4,000-20,000 kernels:
//                     at most 3% of a step of these rows)
//   nvlink/fabric     not fitted: 0.8, the bus bandwidth NCCL's ring reaches of the line rate;
//                     every fit row's collectives hide behind compute, so no row pins them.
const std::vector<GpuTimeCoefficients>& coefficient_table() {
  static const std::vector<GpuTimeCoefficients> kTable = {
      {"h100", 0.4779, 0.25, 0.25, 0.5528, 5e-6, 0.8, 0.8,
       "gemm: 4 H100 fit rows of bench/plan/published/rows.tsv; attention: FlashAttention-2/3 "
       "papers' H100 range; hbm: 13 fit rows"},
      {"a100", 0.6707, 0.73, 0.73, 0.5528, 5e-6, 0.8, 0.8,
       "gemm: 9 A100 fit rows of bench/plan/published/rows.tsv; attention: FlashAttention-2 "
       "paper's A100 range; hbm: 13 fit rows"},
  };
  return kTable;
}

}  // namespace

const GpuTimeCoefficients& gpu_time_coefficients(const std::string& device_id) {
  const auto& t = coefficient_table();
  for (const auto& k : t) {
    if (k.device_id == device_id) return k;
  }
  // H200 is H100's compute with faster HBM; B200 has no published bf16 row yet: both borrow
  // H100's efficiencies (their own peaks and bandwidths still apply).
  static const GpuTimeCoefficients kBorrowed = [] {
    GpuTimeCoefficients k = coefficient_table().front();
    k.sources = "borrowed from h100 (no published bf16 row for this GPU yet): " + k.sources;
    return k;
  }();
  return kBorrowed;
}

StepTimes GpuStepPrice::step_times(const GpuStepWork& w, const DeviceProfile& d,
                                   const GpuTimeCoefficients& k) const {
  StepTimes t;
  t.category[static_cast<size_t>(OpCategory::contraction)] = gemm;
  t.category[static_cast<size_t>(OpCategory::attention)] = attention;
  const double bw = d.mem_bandwidth * k.hbm_efficiency;
  for (size_t c = 0; c < w.memory_bytes.size(); ++c) {
    if (bw > 0) t.category[c] += w.memory_bytes[c] / bw;
  }
  t.category[static_cast<size_t>(OpCategory::collective)] += comm_exposed;
  t.optimizer = optimizer;
  t.overhead = overhead;
  return t;
}

GpuStepPrice price_gpu_step(const GpuStepWork& w, const DeviceProfile& d, const GpuRun& run) {
  const GpuTimeCoefficients& k = gpu_time_coefficients(d.id);
  GpuStepPrice p;
  const double peak = d.peak_bf16_flops;
  const auto over = [](double x, double rate) { return rate > 0 ? x / rate : 0.0; };
  p.gemm = over(w.gemm_flops, peak * k.gemm_efficiency);
  p.attention = over(w.attention_forward_flops, peak * k.attention_forward_efficiency) +
                over(w.attention_backward_flops, peak * k.attention_backward_efficiency);
  const double hbm = d.mem_bandwidth * k.hbm_efficiency;
  p.memory = over(w.memory_bytes_total(), hbm);
  p.overhead = static_cast<double>(w.kernels) * k.kernel_seconds;
  const auto micro_batches = static_cast<double>(std::max<int64_t>(run.micro_batches, 1));
  // Once per optimizer step: its share of each micro-batch.
  p.optimizer =
      over(kAdamBytesPerParam * static_cast<double>(run.local_params), hbm) / micro_batches;
  if (run.ranks > 1) {
    const bool one_node = run.ranks <= kGpusPerNode;
    const double fabric = run.fabric_bandwidth > 0 ? run.fabric_bandwidth : d.fabric_bandwidth;
    // Across nodes NCCL runs one ring channel per NIC, so the node's NICs together carry a
    // ring, up to NVLink's rate.
    const double link =
        one_node ? d.link_bandwidth * k.nvlink_efficiency
                 : std::min(d.link_bandwidth, static_cast<double>(kGpusPerNode) * fabric) *
                       k.fabric_efficiency;
    const GpuStepComm c = gpu_step_comm(
        run.zero, run.params,
        GpuCommLink{.ranks = run.ranks, .gpus_per_node = kGpusPerNode, .bytes_per_s = link});
    const double compute = p.gemm + p.attention + p.memory + p.overhead;  // one micro-batch
    p.comm = c.total(run.micro_batches) / micro_batches;
    p.comm_exposed = c.exposed(compute, run.micro_batches) / micro_batches;
  }
  return p;
}

double model_flops_utilization(const LlamaConfig& m, int64_t seq_len, double tokens_per_s,
                               const DeviceProfile& d) {
  return d.peak_bf16_flops > 0 ? m.flops_per_token(seq_len) * tokens_per_s / d.peak_bf16_flops
                               : 0.0;
}

// bench/plan/published/check.sh on the 10 validation rows (fit.py agrees to the digit).
GpuModelError gpu_validation_error() {
  return {10, kGpuValidationMedianError, 0.120};
}

std::string gpu_model_note() {
  const GpuModelError e = gpu_validation_error();
  return fmt::format(
      "GPU time model: what a well-tuned stack (PyTorch FSDP, flash attention, cuBLAS) achieves "
      "on this GPU, fitted on published runs (bench/plan/published/); error on {} held-out "
      "published runs: median {:.1f}%, worst {:.1f}%; ljperf's own CUDA backend is not measured "
      "yet",
      e.rows, 100 * e.median, 100 * e.worst);
}

}  // namespace lj
