#include "plan/device_catalog.h"

#include <cctype>

#include "runtime/host.h"

namespace lj {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kT = 1e12;
constexpr double kGbit = 1e9 / 8;  // bytes/s in a Gb/s
}  // namespace

const std::vector<DeviceProfile>& gpu_catalog() {
  // Memory is what the driver reports as total (nvidia-smi memory.total), which is what a run's
  // budget is taken of; compute is dense (no structured sparsity); NVLink is per GPU and per
  // direction (datasheets quote the bidirectional total, halved here).
  static const std::vector<DeviceProfile> kCatalog = {
      // NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 1,979 TFLOPS with sparsity -> 989.4
      // dense; FP32 67 TFLOPS; HBM3 3.35 TB/s; NVLink 900 GB/s; 80 GB (nvidia-smi: 81559 MiB).
      // DGX H100 datasheet: 8 ConnectX-7 at 400 Gb/s, one per GPU.
      {"h100", "NVIDIA H100 SXM 80GB", DeviceKind::gpu, 81559 * kMiB, 989.4 * kT, 67 * kT, 3.35e12,
       450e9, 400 * kGbit, "NVIDIA H100 datasheet (SXM5), DGX H100 datasheet"},
      // NVIDIA H200 Tensor Core GPU datasheet (SXM): same compute as H100 SXM (BF16 1,979 sparse
      // -> 989.4 dense, FP32 67 TFLOPS); HBM3e 141 GB at 4.8 TB/s (nvidia-smi: 143771 MiB); NVLink
      // 900 GB/s.
      // DGX H200 datasheet: 8 ConnectX-7 at 400 Gb/s, one per GPU.
      {"h200", "NVIDIA H200 SXM 141GB", DeviceKind::gpu, 143771 * kMiB, 989.4 * kT, 67 * kT, 4.8e12,
       450e9, 400 * kGbit, "NVIDIA H200 datasheet (SXM), DGX H200 datasheet"},
      // NVIDIA A100 Tensor Core GPU datasheet (80GB SXM): BF16 312 TFLOPS dense; FP32 19.5
      // TFLOPS; HBM2e 2,039 GB/s; NVLink 600 GB/s; 80 GB (nvidia-smi: 81920 MiB).
      // DGX A100 datasheet: 8 ConnectX-6 at 200 Gb/s (HDR), one per GPU.
      {"a100", "NVIDIA A100 SXM 80GB", DeviceKind::gpu, 81920 * kMiB, 312 * kT, 19.5 * kT, 2.039e12,
       300e9, 200 * kGbit, "NVIDIA A100 datasheet (80GB SXM), DGX A100 datasheet"},
      // NVIDIA DGX B200 / HGX B200 datasheet: 8 GPUs with 1,440 GB HBM3e (180 GB each) at 64 TB/s
      // (8 TB/s each); FP16/BF16 36 PFLOPS with sparsity for 8 GPUs -> 2.25 PFLOPS dense each;
      // FP32 600 TFLOPS for 8 -> 75 each; NVLink 5 1.8 TB/s per GPU; 8 ConnectX-7 at 400 Gb/s.
      {"b200", "NVIDIA B200 180GB", DeviceKind::gpu, 180e9, 2250 * kT, 75 * kT, 8e12, 900e9,
       400 * kGbit, "NVIDIA DGX B200 datasheet"},
  };
  return kCatalog;
}

std::string device_ids() {
  std::string s = "cpu (this host; also: host)";
  for (const auto& d : gpu_catalog()) s += ", " + d.id;
  return s;
}

StatusOr<DeviceProfile> find_device(const std::string& id, const PredictorCoefficients& model) {
  if (id == "host" || id == "cpu") {
    const HostInfo h = host_info();
    DeviceProfile d;
    d.id = "host";
    d.name = h.cpu_model + " (" + std::to_string(h.cores) + " threads)";
    d.kind = DeviceKind::cpu;
    d.memory_bytes = static_cast<double>(h.mem_total_bytes);
    d.peak_fp32_flops = model.host.gemm_flops;
    d.peak_bf16_flops = 0;  // the CPU backend computes in f32
    d.mem_bandwidth = model.host.mem_bandwidth;
    d.source = "measured by ljperf calibrate --measure (" + model.source + ")";
    return d;
  }
  for (const auto& d : gpu_catalog()) {
    if (d.id == id) return d;
  }
  return invalid_argument("unknown --device '" + id + "'", "use one of: auto, " + device_ids());
}

std::string catalog_id_for(const std::string& gpu_name) {
  std::string lower;
  for (const char c : gpu_name)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& d : gpu_catalog()) {
    if (lower.find(d.id) != std::string::npos) return d.id;
  }
  return "";
}

}  // namespace lj
