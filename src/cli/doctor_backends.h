// Which execution backends this ljperf has: the one table the doctor reads, so that when a
// backend lands (CUDA, MPI) one row changes and every line about it follows. Until then the
// doctor says plainly that a backend does not exist yet and never advises a build flag that
// does nothing (LJ_CUDA and LJ_MPI only reserve the names today).
#pragma once

#include <span>
#include <string_view>

#include "cli/doctor_check.h"

namespace lj::cli {

enum class BackendState {
  built,            // compiled into this binary and used
  not_built,        // exists, but this binary was configured without it (the flag would add it)
  not_implemented,  // no such backend in ljperf yet, whatever the build flags
};
const char* backend_state_name(BackendState state);  // "built", "not built", "not implemented"

struct BackendStatus {
  std::string_view name;        // "cpu", "cuda", "mpi"
  std::string_view what;        // what it runs: "training on NVIDIA GPUs"
  std::string_view build_flag;  // the CMake option that adds it ("" when always built)
  BackendState state;
};

// The table: one row per backend (cpu, cuda, mpi).
std::span<const BackendStatus> backend_status();
// The row named `name`; LJ_CHECKs that it exists.
const BackendStatus& backend(std::string_view name);

// The GPU section's verdict on the CUDA backend for a host with `gpu_count` visible GPUs: warn
// when GPUs would sit idle or cannot be used, ok otherwise.
CheckLine cuda_backend_check(const BackendStatus& cuda, int gpu_count);

// The MPI section's verdict on a launch of `world_size` processes: fail when there are several
// and no collective backend joins them (each would train alone), ok otherwise.
CheckLine mpi_backend_check(const BackendStatus& mpi, int world_size);

}  // namespace lj::cli
