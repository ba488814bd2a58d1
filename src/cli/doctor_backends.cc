// The backend table and the doctor's lines about it; see doctor_backends.h.
#include "cli/doctor_backends.h"

#include <fmt/format.h>

#include "backends/cuda/cuda.h"
#include "core/check.h"
#include "dist/build_info.h"
#include "train/capabilities.h"

namespace lj::cli {
namespace {

const BackendStatus kBackends[] = {
    {"cpu", "training on the CPU (oneDNN GEMMs, OpenMP)", "", BackendState::built},
    {"cuda",
     "training and benchmarks on NVIDIA GPUs (one per rank, NCCL, CUDA graphs; what runs there: "
     "the capabilities section)",
     "LJ_CUDA", cuda::built_with_cuda() ? BackendState::built : BackendState::not_built},
    {"mpi", "multi-process training on the CPU (data parallel with ZeRO)", "LJ_MPI",
     built_with_mpi() ? BackendState::built : BackendState::not_built},
};

}  // namespace

const char* backend_state_name(BackendState state) {
  switch (state) {
    case BackendState::built:
      return "built";
    case BackendState::not_built:
      return "not built";
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
      return {CheckLevel::ok,
              "CUDA backend: built (`ljperf train` and `ljperf benchmark` run on the GPU with "
              "--device cuda, one GPU per rank under mpirun, gradients over NCCL)",
              ""};
    case BackendState::not_built:
      return {gpu_count > 0 ? CheckLevel::warn : CheckLevel::ok,
              "CUDA backend: not built into this ljperf" + idle,
              gpu_count > 0
                  ? fmt::format("rebuild with -D{}=ON to train on the GPUs", cuda.build_flag)
                  : ""};
  }
  return {};
}

CheckLine mpi_backend_check(const BackendStatus& mpi, int world_size) {
  const bool many = world_size > 1;
  switch (mpi.state) {
    case BackendState::built:
      return {CheckLevel::ok,
              "MPI backend: built (data-parallel training, ZeRO stages " +
                  supported_values(TrainDevice::cpu, "zero") + ")",
              ""};
    case BackendState::not_built:
      if (!many) return {CheckLevel::ok, "MPI backend: not built into this ljperf", ""};
      return {CheckLevel::fail,
              fmt::format("launched as {} processes but ljperf was built without MPI: each would "
                          "train alone",
                          world_size),
              fmt::format("rebuild with -D{}=ON", mpi.build_flag)};
  }
  return {};
}

std::string mpi_family(std::string_view text) {
  if (text.find("Open MPI") != std::string_view::npos ||
      text.find("OpenRTE") != std::string_view::npos) {
    return "Open MPI";
  }
  if (text.find("Intel(R) MPI") != std::string_view::npos ||
      text.find("Intel MPI") != std::string_view::npos) {
    return "Intel MPI";
  }
  if (text.find("MPICH") != std::string_view::npos ||
      text.find("HYDRA") != std::string_view::npos) {
    return "MPICH";
  }
  return "";
}

namespace {

// The first run of digits and dots at or after `from` ("4.1.4"); "" when none.
std::string version_after(std::string_view text, size_t from) {
  const size_t b = text.find_first_of("0123456789", from);
  if (b == std::string_view::npos) return "";
  const size_t e = text.find_first_not_of("0123456789.", b);
  std::string v(text.substr(b, e == std::string_view::npos ? e : e - b));
  while (!v.empty() && v.back() == '.') v.pop_back();
  return v;
}

}  // namespace

std::string mpi_implementation(std::string_view out) {
  const std::string family = mpi_family(out);
  if (family.empty()) return "";
  size_t from = 0;
  if (family == "Open MPI") {
    from = out.find(')');  // "mpirun (Open MPI) 4.1.4"
  } else if (family == "MPICH") {
    from = out.find("Version:");  // HYDRA's "Version:                                 4.0.2"
  } else {
    from = out.find("Version");  // "Intel(R) MPI Library for Linux* OS, Version 2021.9 Build ..."
  }
  const std::string v = version_after(out, from == std::string_view::npos ? 0 : from);
  return v.empty() ? family : family + " " + v;
}

CheckLine mpi_launcher_check(const std::string& library, const std::string& launcher,
                             const std::string& launcher_impl) {
  const std::string impl = launcher_impl.empty() ? "an unknown MPI" : launcher_impl;
  if (library.empty()) {
    if (launcher.empty()) return {CheckLevel::ok, "built without MPI; no mpirun on PATH", ""};
    return {CheckLevel::warn,
            fmt::format("{} is {}, but this ljperf was built without MPI: `mpirun -np N ljperf` "
                        "is refused",
                        launcher, impl),
            "install libopenmpi-dev and rebuild (LJ_MPI is on whenever MPI is found)"};
  }
  if (launcher.empty()) {
    return {CheckLevel::warn, fmt::format("built with MPI ({}) but no mpirun on PATH", library),
            "install openmpi-bin (or your MPI's launcher), or start ranks with srun --mpi=pmix"};
  }
  const std::string want = mpi_family(library), have = mpi_family(launcher_impl);
  if (!want.empty() && !have.empty() && want != have) {
    return {CheckLevel::warn,
            fmt::format("{} is {}, but ljperf was built with {}: its processes would not join one "
                        "world",
                        launcher, impl, library),
            fmt::format("put {}'s mpirun first on PATH", want)};
  }
  return {CheckLevel::ok,
          fmt::format("mpirun: {} ({}); ljperf built with {}", impl, launcher, library), ""};
}

}  // namespace lj::cli
