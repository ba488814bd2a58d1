// The backend table and the doctor's lines about it; see doctor_backends.h.
#include "cli/doctor_backends.h"

#include <fmt/format.h>

#include "core/check.h"

namespace lj::cli {
namespace {

// When CUDA lands: {"cuda", ..., kBuiltWithCuda ? BackendState::built : BackendState::not_built}
// (and likewise for MPI with LJ_MPI).
constexpr BackendStatus kBackends[] = {
    {"cpu", "training on the CPU (oneDNN GEMMs, OpenMP)", "", BackendState::built},
    {"cuda", "training on NVIDIA GPUs", "LJ_CUDA", BackendState::not_implemented},
    {"mpi", "multi-process training (collectives between ranks)", "LJ_MPI",
     BackendState::not_implemented},
};

}  // namespace

const char* backend_state_name(BackendState state) {
  switch (state) {
    case BackendState::built:
      return "built";
    case BackendState::not_built:
      return "not built";
    case BackendState::not_implemented:
      return "not implemented";
  }
  return "?";
}

std::span<const BackendStatus> backend_status() {
  return kBackends;
}

const BackendStatus& backend(std::string_view name) {
  for (const BackendStatus& b : kBackends) {
    if (b.name == name) return b;
  }
  LJ_CHECK(false) << "no backend named " << name;
  return kBackends[0];
}

CheckLine cuda_backend_check(const BackendStatus& cuda, int gpu_count) {
  const std::string idle =
      gpu_count > 0 ? fmt::format("; the {} GPU{} here stay idle and training runs on the CPU",
                                  gpu_count, gpu_count == 1 ? "" : "s")
                    : "";
  switch (cuda.state) {
    case BackendState::built:
      return {CheckLevel::ok, "CUDA backend: built", ""};
    case BackendState::not_built:
      return {gpu_count > 0 ? CheckLevel::warn : CheckLevel::ok,
              "CUDA backend: not built into this ljperf" + idle,
              gpu_count > 0
                  ? fmt::format("rebuild with -D{}=ON to train on the GPUs", cuda.build_flag)
                  : ""};
    case BackendState::not_implemented:
      return {CheckLevel::warn,
              "CUDA backend: not implemented yet in this ljperf; GPU runs are planned (`ljperf "
              "plan --device h100`) but not executed" +
                  idle,
              gpu_count > 0 ? "no build option adds it yet; ljperf benchmark and train use the CPU"
                            : ""};
  }
  return {};
}

CheckLine mpi_backend_check(const BackendStatus& mpi, int world_size) {
  const bool many = world_size > 1;
  switch (mpi.state) {
    case BackendState::built:
      return {CheckLevel::ok, "MPI backend: built", ""};
    case BackendState::not_built:
      if (!many) return {CheckLevel::ok, "MPI backend: not built into this ljperf", ""};
      return {CheckLevel::fail,
              fmt::format("launched as {} processes but ljperf was built without MPI: each would "
                          "train alone",
                          world_size),
              fmt::format("rebuild with -D{}=ON", mpi.build_flag)};
    case BackendState::not_implemented:
      if (!many) {
        return {CheckLevel::ok,
                "multi-process training (MPI) is not implemented yet in this ljperf; it runs as "
                "one process",
                ""};
      }
      return {CheckLevel::fail,
              fmt::format("launched as {} processes, but multi-process training is not "
                          "implemented yet in this ljperf: each process would train alone",
                          world_size),
              "run one process (without mpirun, srun or torchrun)"};
  }
  return {};
}

}  // namespace lj::cli
