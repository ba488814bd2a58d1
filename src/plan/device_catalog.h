// The devices the planner knows: this CPU host (profile measured by `ljperf calibrate --measure`,
// read from the coefficients file) and NVIDIA data-centre GPUs (published datasheet figures).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "plan/coefficients.h"

namespace lj {

enum class DeviceKind : uint8_t { cpu, gpu };

struct DeviceProfile {
  std::string id;    // "host", "h100", ...
  std::string name;  // "NVIDIA H100 SXM 80GB"
  DeviceKind kind = DeviceKind::gpu;
  double memory_bytes = 0;     // usable device memory (host: MemTotal)
  double peak_bf16_flops = 0;  // dense
  double peak_fp32_flops = 0;  // dense, non-tensor-core
  double mem_bandwidth = 0;    // bytes/s
  double link_bandwidth = 0;   // NVLink, bytes/s per GPU per direction (0: none)
  // Inter-node network, bytes/s per GPU per direction, of the vendor's reference node (DGX/HGX:
  // one NIC per GPU); `ljperf plan --fabric-gbps` overrides it for another cluster.
  double fabric_bandwidth = 0;
  std::string source;  // where the figures come from
};

// The GPUs of the catalog, in the order --help lists them.
const std::vector<DeviceProfile>& gpu_catalog();
// "cpu" or "host" (from the coefficients file's host profile and /proc/meminfo) or a catalog id.
StatusOr<DeviceProfile> find_device(const std::string& id, const PredictorCoefficients& model);
// "cpu (this host; also: host), h100, h200, a100, b200".
std::string device_ids();
// The catalog id a GPU's name belongs to ("NVIDIA H100 80GB HBM3" -> "h100"); "" when none.
std::string catalog_id_for(const std::string& gpu_name);

}  // namespace lj
