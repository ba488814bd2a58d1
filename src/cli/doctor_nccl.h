// The doctor's NCCL rule: NCCL_SOCKET_IFNAME per GPUs in a pod, as the seed image's usage
// notes give it, and this host's network interfaces to check the advice against.
#pragma once

#include <string>
#include <vector>

#include "cli/doctor_check.h"

namespace lj::cli {

// NCCL_SOCKET_IFNAME for a pod using `gpus_per_pod` GPUs: eth0 for 1, 2, 4 or 8, hpn0 for all 16
// of a host. `current_value` is the variable's value (nullptr when unset); a leading '=' (NCCL's
// exact-match marker) is ignored. ok when it matches; warn when unset, different, or the count is
// one the guidance does not cover. gpus_per_pod <= 0 (no GPU) is ok: NCCL is not used.
CheckLine nccl_ifname_advice(int gpus_per_pod, const char* current_value);

// The interface nccl_ifname_advice recommends for this pod size; empty when not covered.
std::string recommended_nccl_ifname(int gpus_per_pod);

// Network interfaces of this host (/sys/class/net), sorted.
std::vector<std::string> network_interfaces();

}  // namespace lj::cli
