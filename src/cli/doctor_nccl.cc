// The doctor's NCCL_SOCKET_IFNAME rule; see doctor_nccl.h.
#include "cli/doctor_nccl.h"

#include <algorithm>
#include <filesystem>

namespace lj::cli {
namespace {

std::string gpus_phrase(int n) {
  return std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
}

}  // namespace

std::string recommended_nccl_ifname(int gpus_per_pod) {
  switch (gpus_per_pod) {
    case 1:
    case 2:
    case 4:
    case 8:
      return "eth0";
    case 16:
      return "hpn0";
    default:
      return "";
  }
}

CheckLine nccl_ifname_advice(int gpus_per_pod, const char* current_value) {
  std::string current = current_value == nullptr ? "" : current_value;
  const std::string shown =
      current.empty() ? "NCCL_SOCKET_IFNAME is not set" : "NCCL_SOCKET_IFNAME=" + current;
  if (!current.empty() && current.front() == '=') current.erase(0, 1);  // NCCL's exact match
  if (gpus_per_pod <= 0) {
    return {CheckLevel::ok, shown + "; no GPUs in this pod, so NCCL is not used", ""};
  }
  const std::string pod = "a pod using " + gpus_phrase(gpus_per_pod);
  const std::string want = recommended_nccl_ifname(gpus_per_pod);
  if (want.empty()) {
    return {CheckLevel::warn,
            shown + "; the image's guidance covers pods of 1, 2, 4, 8 or 16 GPUs, not " +
                std::to_string(gpus_per_pod),
            "use NCCL_SOCKET_IFNAME=eth0 for 1, 2, 4 or 8 GPUs per pod and hpn0 when a pod "
            "uses all 16 GPUs of a host; otherwise name the interface your cluster uses"};
  }
  const std::string why = want == "hpn0" ? " (HPN, for a pod with all 16 GPUs of a host)" : "";
  if (current == want) return {CheckLevel::ok, shown + ", right for " + pod, ""};
  if (current.empty()) {
    return {CheckLevel::warn, shown + "; " + pod + " should use " + want + why,
            "export NCCL_SOCKET_IFNAME=" + want};
  }
  return {CheckLevel::warn, shown + ", but " + pod + " should use " + want + why,
          "export NCCL_SOCKET_IFNAME=" + want};
}

std::vector<std::string> network_interfaces() {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/sys/class/net", ec), end; !ec && it != end;
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace lj::cli
