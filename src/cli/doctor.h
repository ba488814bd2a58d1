// `ljperf doctor`: checks this host against what ljperf and the seed image's usage notes need
// (CPU features and threads, oneDNN, MPI launch variables, NVIDIA driver vs CUDA,
// NCCL_SOCKET_IFNAME, a DeepSpeed config's stage3_prefetch_bucket_size) and prints each finding
// as ok / warn / fail with a hint. Exits 0 unless --strict and something failed.
#pragma once

#include "cli/cli.h"

namespace lj::cli {

Command add_doctor_command(CLI::App& app);

}  // namespace lj::cli
