// The rules behind `ljperf doctor`: what the seed image's usage notes ask a user to get right
// (DeepSpeed's stage3_prefetch_bucket_size, NCCL_SOCKET_IFNAME per GPUs in a pod, the driver
// each CUDA version needs) and where a distributed launch's rank, world size and local rank come
// from. The rules and parsers are pure functions over strings and an environment callback so
// tests can feed them fake hosts; the probe_* functions read the real one (/proc, PATH,
// nvidia-smi) and never fail: an absent tool or file is an empty answer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace lj {

// ---- Report lines ----

enum class CheckLevel { ok, warn, fail };
const char* check_level_name(CheckLevel level);  // "ok", "warn", "fail"

// One line of the doctor's report: a verdict, what was found, and what to do about it.
struct CheckLine {
  CheckLevel level = CheckLevel::ok;
  std::string text;
  std::string hint;  // empty when there is nothing to do
};

// ---- Distributed launch (REFERENCE.md "Distributed launch") ----

// Looks up an environment variable; nullptr when unset. `std::getenv` in production.
using EnvLookup = std::function<const char*(const char*)>;

// The variables each value is read from, first found wins. The one table of these names.
inline constexpr const char* kRankVars[] = {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK",
                                            "SLURM_PROCID"};
inline constexpr const char* kWorldSizeVars[] = {"WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                                 "SLURM_NTASKS"};
inline constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "MPI_LOCALRANKID",
                                                 "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // The variable each value came from; empty when none was set and the default was used.
  std::string rank_var;
  std::string world_size_var;
  std::string local_rank_var;
  // Lower-precedence variables that are set to a different value than the one used, as
  // "OMPI_COMM_WORLD_RANK=3 (RANK=0 is used)": usually a stale export from another launcher.
  std::vector<std::string> shadowed;
  bool launched() const { return !rank_var.empty() || !world_size_var.empty(); }
};

// Rank, world size and local rank from the first variable set in each list above; none set
// means a single process (rank 0 of 1). A value that is not a non-negative integer, a world
// size below 1, or a rank outside [0, world_size) is an invalid_argument naming the variable.
StatusOr<LaunchEnv> resolve_launch_env(const EnvLookup& env);

// ---- GPU driver and CUDA ----

// The driver each CUDA version needs (the seed image's release note). The one table of these.
struct CudaDriverRequirement {
  const char* cuda_version;  // "major.minor"
  int min_driver_major;
};
inline constexpr CudaDriverRequirement kCudaDriverRequirements[] = {{"13.0", 580}, {"12.8", 575}};

// ok when a driver of major version `driver_major` runs `cuda_version` ("13.0", "12.8.0"; only
// major.minor is compared), warn when it is too old or the version is not in the table.
CheckLine cuda_driver_check(int driver_major, std::string_view cuda_version);

// "580.65.06" -> 580. invalid_argument when the text does not start with a number.
StatusOr<int> parse_driver_major(std::string_view driver_version);

// The driver version in the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX
// x86_64 Kernel Module  580.65.06  ..." or the Open Kernel Module form). invalid_argument when
// there is no NVRM line with a dotted version.
StatusOr<std::string> parse_nvidia_proc_version(std::string_view text);

struct GpuDevice {
  std::string name;
  std::string driver_version;
  int64_t memory_bytes = 0;  // 0 when nvidia-smi says [N/A]
};

// The output of `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader`:
// one "NVIDIA H200, 580.65.06, 143771 MiB" line per GPU. Empty text is no GPUs; a line without
// three fields or with a memory that is neither a size nor [N/A] is invalid_argument.
StatusOr<std::vector<GpuDevice>> parse_nvidia_smi_csv(std::string_view text);

// What the host says about NVIDIA GPUs, read without linking CUDA.
struct GpuProbe {
  std::string driver_version;    // empty when no NVIDIA driver is loaded
  std::vector<GpuDevice> gpus;   // from nvidia-smi; empty when it is absent or failed
  int proc_gpu_count = 0;        // entries of /proc/driver/nvidia/gpus
  std::string nvidia_smi_path;   // empty when nvidia-smi is not on PATH
  std::string nvidia_smi_error;  // why nvidia-smi's answer was not used; empty when it was
  int gpu_count() const { return gpus.empty() ? proc_gpu_count : static_cast<int>(gpus.size()); }
};
GpuProbe probe_gpus();

// ---- Seed image usage notes ----

// NCCL_SOCKET_IFNAME for a pod using `gpus_per_pod` GPUs: eth0 for 1, 2, 4 or 8, hpn0 for all 16
// of a host. `current_value` is the variable's value (nullptr when unset); a leading '=' (NCCL's
// exact-match marker) is ignored. ok when it matches; warn when unset, different, or the count is
// one the guidance does not cover. gpus_per_pod <= 0 (no GPU) is ok: NCCL is not used.
CheckLine nccl_ifname_advice(int gpus_per_pod, const char* current_value);

// The interface nccl_ifname_advice recommends for this pod size; empty when not covered.
std::string recommended_nccl_ifname(int gpus_per_pod);

// zero_optimization.stage3_prefetch_bucket_size in a DeepSpeed JSON text (`src` names it in
// messages): ok when absent, null, "" or "auto"; warn quoting the value when it is a number;
// fail when the JSON is malformed, zero_optimization is not an object, or the value is any other
// string or type.
CheckLine stage3_prefetch_advice(std::string_view json_text, const std::string& src);

// The same for a file; a file that cannot be read is a fail line.
CheckLine deepspeed_file_advice(const std::string& path);

// ---- Small host probes ----

// The first directory of `path_env` (a PATH value) holding an executable `name`; empty if none.
std::string find_on_path(const std::string& name, const char* path_env);

// Network interfaces of this host (/sys/class/net), sorted.
std::vector<std::string> network_interfaces();

// x86 vector extensions, as the compiler was told to use them or as the host has them.
struct IsaFlags {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
};
std::string isa_names(
    const IsaFlags& isa);  // "AVX2 FMA AVX-512F", or "none of AVX2, FMA, AVX-512F"

// What this binary was compiled for (__AVX2__, __FMA__, __AVX512F__).
IsaFlags compiled_isa();

// fail when the binary uses an extension the host lacks (it would die of SIGILL in a kernel);
// ok otherwise.
CheckLine compiled_isa_check(const IsaFlags& built, const IsaFlags& host);

// The whole text of a small file, or an empty string when it cannot be read.
std::string read_small_file(const std::string& path);

}  // namespace lj
