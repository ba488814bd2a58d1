// Which execution backends this ljperf has: the one table the doctor reads, so that when a
// backend changes one row changes and every line about it follows. CUDA and MPI exist: their
// rows say whether this binary was built with them (backends/cuda/cuda.h, dist/build_info.h).
// What each device runs once built is train/capabilities.h's table.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/doctor_check.h"

namespace lj::cli {

enum class BackendState {
  built,      // compiled into this binary and used
  not_built,  // exists, but this binary was configured without it (the flag would add it)
};
const char* backend_state_name(BackendState state);  // "built", "not built"

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

// The MPI implementation that `mpirun --version` (or `mpiexec --version`) names: "Open MPI
// 4.1.4", "MPICH 4.0.2", "Intel MPI 2021.9"; "" when the text names none of them.
std::string mpi_implementation(std::string_view version_output);
// The family of an implementation or library version string: "Open MPI", "MPICH", "Intel MPI",
// or "" when unknown. Open MPI's launcher cannot start an MPICH-built binary as one world.
std::string mpi_family(std::string_view text);

// The launcher against the build: `library` is dist/build_info.h mpi_library_version() ("" when
// built without MPI); `launcher` the path of mpirun found on PATH ("" when none) and
// `launcher_impl` what its --version names. Warns when multi-process runs cannot start: a build
// without MPI, no launcher, or a launcher of another MPI than the library's.
CheckLine mpi_launcher_check(const std::string& library, const std::string& launcher,
                             const std::string& launcher_impl);

}  // namespace lj::cli
