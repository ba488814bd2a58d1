// Tier 1: the rules behind `ljperf doctor` (cli/doctor_*.h) over fake tool output — driver vs
// CUDA, /proc/driver/nvidia/version and nvidia-smi parsing, NCCL_SOCKET_IFNAME per pod size,
// DeepSpeed's stage3_prefetch_bucket_size, the host probes, and what the doctor says about
// backends that do not exist yet.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "backends/cuda/cuda.h"
#include "cli/doctor_backends.h"
#include "cli/doctor_deepspeed.h"
#include "cli/doctor_gpu.h"
#include "cli/doctor_host.h"
#include "cli/doctor_nccl.h"
#include "dist/build_info.h"

namespace lj::cli {
namespace {

TEST(CudaDriver, ReleaseNoteTable) {
  struct Case {
    int driver;
    const char* cuda;
    CheckLevel want;
  };
  const Case cases[] = {
      {575, "12.8", CheckLevel::ok},     {575, "13.0", CheckLevel::warn},
      {579, "12.8", CheckLevel::ok},     {579, "13.0", CheckLevel::warn},
      {580, "12.8", CheckLevel::ok},     {580, "13.0", CheckLevel::ok},
      {574, "12.8", CheckLevel::warn},   {580, "13.0.2", CheckLevel::ok},
      {579, "13.0.2", CheckLevel::warn}, {600, "12.8.0", CheckLevel::ok},
  };
  for (const Case& c : cases) {
    const CheckLine l = cuda_driver_check(c.driver, c.cuda);
    EXPECT_EQ(l.level, c.want) << c.driver << " vs CUDA " << c.cuda << ": " << l.text;
    EXPECT_EQ(l.hint.empty(), c.want == CheckLevel::ok) << l.text;
  }
  const CheckLine old = cuda_driver_check(579, "13.0");
  EXPECT_NE(old.text.find("580"), std::string::npos) << old.text;
  EXPECT_NE(old.hint.find("580"), std::string::npos) << old.hint;
  // A version the release note does not list is a warning, not a guess.
  EXPECT_EQ(cuda_driver_check(999, "11.0").level, CheckLevel::warn);
  // "13" alone is not "13.0".
  EXPECT_EQ(cuda_driver_check(999, "13").level, CheckLevel::warn);
}

TEST(CudaDriver, ParseDriverMajor) {
  EXPECT_EQ(*parse_driver_major("580.65.06"), 580);
  EXPECT_EQ(*parse_driver_major("575.51.03\n"), 575);
  EXPECT_EQ(*parse_driver_major("535"), 535);
  EXPECT_FALSE(parse_driver_major("").ok());
  EXPECT_FALSE(parse_driver_major("N/A").ok());
  EXPECT_FALSE(parse_driver_major("580x").ok());
}

TEST(NvidiaProc, ProprietaryAndOpenModuleText) {
  const char* proprietary =
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08  Sat May 24 07:21:18 UTC 2025\n"
      "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
  auto v = parse_nvidia_proc_version(proprietary);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, "575.57.08");
  const char* open =
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  "
      "(dvs-builder@U22-I3-AE18-09-3)  Sun Jul 27 06:54:38 UTC 2025\n"
      "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n";
  v = parse_nvidia_proc_version(open);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, "580.65.06");
  const char* aarch64 =
      "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.82.07  "
      "Release Build\n";
  EXPECT_EQ(*parse_nvidia_proc_version(aarch64), "580.82.07");
  EXPECT_FALSE(parse_nvidia_proc_version("").ok());
  EXPECT_FALSE(parse_nvidia_proc_version("GCC version: gcc version 12.2.0\n").ok());
  EXPECT_FALSE(parse_nvidia_proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module\n").ok());
}

TEST(NvidiaSmi, CsvLines) {
  const char* two = "NVIDIA H200, 580.65.06, 143771 MiB\nNVIDIA H200, 580.65.06, 143771 MiB\n";
  auto g = parse_nvidia_smi_csv(two);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].name, "NVIDIA H200");
  EXPECT_EQ((*g)[0].driver_version, "580.65.06");
  EXPECT_EQ((*g)[1].memory_bytes, int64_t{143771} << 20);
  // CRLF, blank lines, [N/A] memory, a comma inside the name.
  g = parse_nvidia_smi_csv("\r\nTesla T4, 575.51.03, [N/A]\r\nOdd, GPU, 575.51.03, 16 GiB\r\n");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].memory_bytes, 0);
  EXPECT_EQ((*g)[1].name, "Odd, GPU");
  EXPECT_EQ((*g)[1].memory_bytes, int64_t{16} << 30);
  EXPECT_TRUE(parse_nvidia_smi_csv("").ok());
  EXPECT_TRUE(parse_nvidia_smi_csv("")->empty());
  EXPECT_FALSE(parse_nvidia_smi_csv("NVIDIA-SMI has failed because it couldn't communicate with "
                                    "the NVIDIA driver.\n")
                   .ok());
  EXPECT_FALSE(parse_nvidia_smi_csv("NVIDIA H200, 580.65.06, lots\n").ok());
  EXPECT_FALSE(parse_nvidia_smi_csv(", 143771 MiB\n").ok());
}

TEST(NcclIfname, PodSizes) {
  for (int gpus : {1, 2, 4, 8}) {
    EXPECT_EQ(recommended_nccl_ifname(gpus), "eth0") << gpus;
    EXPECT_EQ(nccl_ifname_advice(gpus, "eth0").level, CheckLevel::ok) << gpus;
    const CheckLine wrong = nccl_ifname_advice(gpus, "hpn0");
    EXPECT_EQ(wrong.level, CheckLevel::warn) << gpus;
    EXPECT_EQ(wrong.hint, "export NCCL_SOCKET_IFNAME=eth0");
    EXPECT_NE(wrong.text.find("hpn0"), std::string::npos) << wrong.text;
  }
  EXPECT_EQ(recommended_nccl_ifname(16), "hpn0");
  EXPECT_EQ(nccl_ifname_advice(16, "hpn0").level, CheckLevel::ok);
  const CheckLine default_on_16 = nccl_ifname_advice(16, "eth0");
  EXPECT_EQ(default_on_16.level, CheckLevel::warn);
  EXPECT_EQ(default_on_16.hint, "export NCCL_SOCKET_IFNAME=hpn0");
  // NCCL's '=' exact-match marker is not a mismatch.
  EXPECT_EQ(nccl_ifname_advice(16, "=hpn0").level, CheckLevel::ok);
  // Unset: the image sets eth0 by default, so an unset variable here is worth a warning.
  const CheckLine unset = nccl_ifname_advice(8, nullptr);
  EXPECT_EQ(unset.level, CheckLevel::warn);
  EXPECT_NE(unset.text.find("not set"), std::string::npos) << unset.text;
  EXPECT_EQ(nccl_ifname_advice(4, "").level, CheckLevel::warn);
  // Counts the guidance does not cover.
  for (int gpus : {3, 5, 12, 32}) {
    EXPECT_EQ(recommended_nccl_ifname(gpus), "") << gpus;
    const CheckLine l = nccl_ifname_advice(gpus, "eth0");
    EXPECT_EQ(l.level, CheckLevel::warn) << gpus;
    EXPECT_NE(l.text.find("1, 2, 4, 8 or 16"), std::string::npos) << l.text;
  }
  // No GPU: NCCL is not used, whatever the variable says.
  EXPECT_EQ(nccl_ifname_advice(0, nullptr).level, CheckLevel::ok);
  EXPECT_EQ(nccl_ifname_advice(0, "hpn0").level, CheckLevel::ok);
}

TEST(DeepSpeedStage3Prefetch, Advice) {
  EXPECT_EQ(stage3_prefetch_advice(R"({"train_batch_size": 8})", "ds.json").level, CheckLevel::ok);
  EXPECT_EQ(stage3_prefetch_advice(R"({"zero_optimization": {"stage": 3}})", "ds.json").level,
            CheckLevel::ok);
  EXPECT_EQ(stage3_prefetch_advice(
                R"({"zero_optimization": {"stage3_prefetch_bucket_size": "auto"}})", "ds.json")
                .level,
            CheckLevel::ok);
  EXPECT_EQ(stage3_prefetch_advice(
                R"({"zero_optimization": {"stage3_prefetch_bucket_size": null}})", "ds.json")
                .level,
            CheckLevel::ok);
  const CheckLine number = stage3_prefetch_advice(
      R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 50000000}})", "ds.json");
  EXPECT_EQ(number.level, CheckLevel::warn);
  EXPECT_NE(number.text.find("50000000"), std::string::npos) << number.text;
  EXPECT_NE(number.text.find("ds.json"), std::string::npos) << number.text;
  EXPECT_NE(number.hint.find("auto"), std::string::npos) << number.hint;
  const CheckLine float_number = stage3_prefetch_advice(
      R"({"zero_optimization": {"stage3_prefetch_bucket_size": 5e7}})", "ds.json");
  EXPECT_EQ(float_number.level, CheckLevel::warn);
  EXPECT_NE(float_number.text.find("50000000"), std::string::npos) << float_number.text;
  // Malformed and mistyped configs fail.
  EXPECT_EQ(stage3_prefetch_advice(R"({"zero_optimization": {)", "ds.json").level,
            CheckLevel::fail);
  EXPECT_EQ(stage3_prefetch_advice("[1, 2]", "ds.json").level, CheckLevel::fail);
  EXPECT_EQ(stage3_prefetch_advice(R"({"zero_optimization": 3})", "ds.json").level,
            CheckLevel::fail);
  EXPECT_EQ(stage3_prefetch_advice(
                R"({"zero_optimization": {"stage3_prefetch_bucket_size": "5e7"}})", "ds.json")
                .level,
            CheckLevel::fail);
  EXPECT_EQ(stage3_prefetch_advice(
                R"({"zero_optimization": {"stage3_prefetch_bucket_size": true}})", "ds.json")
                .level,
            CheckLevel::fail);
}

TEST(DeepSpeedStage3Prefetch, Files) {
  const std::vector<CheckLine> missing = deepspeed_file_advice("/nonexistent/ds.json");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].level, CheckLevel::fail);
  EXPECT_NE(missing[0].text.find("/nonexistent/ds.json"), std::string::npos) << missing[0].text;
  const std::string path =
      (std::filesystem::temp_directory_path() / "lj_doctor_rules_ds.json").string();
  {
    std::ofstream f(path);
    f << R"({"zero_optimization": {"stage3_prefetch_bucket_size": 1000}})";
  }
  const std::vector<CheckLine> lines = deepspeed_file_advice(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].level, CheckLevel::warn);
  EXPECT_EQ(lines[1].level, CheckLevel::ok) << lines[1].text;
  std::remove(path.c_str());
}

// The doctor reads a file with the parser benchmark uses: what benchmark warns about or refuses,
// the doctor does too.
TEST(DeepSpeedStage3Prefetch, ParserLines) {
  const std::vector<CheckLine> unknown =
      deepspeed_parse_lines(R"({"zero_optimization": {"stage": 3, "stag3_typo": 1}})", "ds.json");
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0].level, CheckLevel::warn);
  EXPECT_NE(unknown[0].text.find("stag3_typo"), std::string::npos) << unknown[0].text;
  const std::vector<CheckLine> refused = deepspeed_parse_lines(
      R"({"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})", "ds.json");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].level, CheckLevel::fail);
  EXPECT_NE(refused[0].text.find("offload_optimizer"), std::string::npos) << refused[0].text;
  EXPECT_EQ(deepspeed_parse_lines(R"({"zero_optimization": {"stage": 3}})", "ds.json")[0].level,
            CheckLevel::ok);
}

TEST(HostProbes, FindOnPathAndIsa) {
  EXPECT_EQ(find_on_path("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(find_on_path("sh", nullptr), "");
  EXPECT_EQ(find_on_path("no-such-tool-lj", "/bin:/usr/bin"), "");
  const IsaFlags all{true, true, true};
  const IsaFlags avx2_only{true, true, false};
  EXPECT_EQ(compiled_isa_check(avx2_only, all).level, CheckLevel::ok);
  EXPECT_EQ(compiled_isa_check(IsaFlags{}, IsaFlags{}).level, CheckLevel::ok);
  const CheckLine sigill = compiled_isa_check(all, avx2_only);
  EXPECT_EQ(sigill.level, CheckLevel::fail);
  EXPECT_NE(sigill.text.find("AVX-512F"), std::string::npos) << sigill.text;
}

TEST(Backends, OneRowEachCpuCudaAndMpi) {
  ASSERT_EQ(backend_status().size(), 3u);
  EXPECT_EQ(backend("cpu").state, BackendState::built);
  EXPECT_EQ(backend("cuda").state,
            cuda::built_with_cuda() ? BackendState::built : BackendState::not_built);
  EXPECT_STREQ(backend_state_name(BackendState::not_built), "not built");
}

bool mentions(const CheckLine& l, const std::string& s) {
  return l.text.find(s) != std::string::npos || l.hint.find(s) != std::string::npos;
}

TEST(Backends, CudaRowOnceItExists) {
  BackendStatus cuda = backend("cuda");
  cuda.state = BackendState::not_built;
  const CheckLine idle = cuda_backend_check(cuda, 2);
  EXPECT_EQ(idle.level, CheckLevel::warn);
  EXPECT_EQ(idle.hint, "rebuild with -DLJ_CUDA=ON to train on the GPUs");
  EXPECT_EQ(cuda_backend_check(cuda, 0).level, CheckLevel::ok);
  cuda.state = BackendState::built;
  EXPECT_EQ(cuda_backend_check(cuda, 2).level, CheckLevel::ok);
  EXPECT_TRUE(mentions(cuda_backend_check(cuda, 2),
                       "`ljperf train` and `ljperf benchmark` run on the GPU"));
}

TEST(Backends, MpiRowSaysWhetherThisBinaryHasIt) {
  const BackendStatus& mpi = backend("mpi");
  EXPECT_EQ(mpi.state, built_with_mpi() ? BackendState::built : BackendState::not_built);
  // Built: a launch of several processes trains them together.
  BackendStatus built = mpi;
  built.state = BackendState::built;
  const CheckLine four = mpi_backend_check(built, 4);
  EXPECT_EQ(four.level, CheckLevel::ok);
  EXPECT_TRUE(mentions(four, "ZeRO stages 0, 1, 2, 3")) << four.text;
  // Not built: a binary launched as several processes is told the flag; one process is fine.
  BackendStatus off = mpi;
  off.state = BackendState::not_built;
  EXPECT_EQ(mpi_backend_check(off, 4).level, CheckLevel::fail);
  EXPECT_EQ(mpi_backend_check(off, 4).hint, "rebuild with -DLJ_MPI=ON");
  EXPECT_EQ(mpi_backend_check(off, 1).level, CheckLevel::ok);
}

TEST(Backends, MpiImplementationFromLauncherVersionText) {
  EXPECT_EQ(mpi_implementation("mpirun (Open MPI) 4.1.4\n\nReport bugs to "
                               "http://www.open-mpi.org/community/help/\n"),
            "Open MPI 4.1.4");
  EXPECT_EQ(mpi_implementation("HYDRA build details:\n    Version:                                 "
                               "4.0.2\n    Release Date:  Thu Apr  7 12:34:45 CDT 2022\n"
                               "    Configure options: ... MPICH ...\n"),
            "MPICH 4.0.2");
  EXPECT_EQ(mpi_implementation("Intel(R) MPI Library for Linux* OS, Version 2021.9 Build "
                               "20230307 (id: d82b3071db)\n"),
            "Intel MPI 2021.9");
  EXPECT_EQ(mpi_implementation("bash: mpirun: command not found"), "");
  EXPECT_EQ(mpi_family("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4"), "Open MPI");
  EXPECT_EQ(mpi_family("MPICH Version:\t4.0.2"), "MPICH");
}

TEST(Backends, MpiLauncherAgainstTheBuild) {
  const std::string ompi = "Open MPI v4.1.4, package: Debian OpenMPI";
  EXPECT_EQ(mpi_launcher_check(ompi, "/usr/bin/mpirun", "Open MPI 4.1.4").level, CheckLevel::ok);
  const CheckLine other = mpi_launcher_check(ompi, "/opt/mpich/bin/mpirun", "MPICH 4.0.2");
  EXPECT_EQ(other.level, CheckLevel::warn);
  EXPECT_TRUE(mentions(other, "would not join one world")) << other.text;
  EXPECT_EQ(mpi_launcher_check(ompi, "", "").level, CheckLevel::warn);
  const CheckLine unbuilt = mpi_launcher_check("", "/usr/bin/mpirun", "Open MPI 4.1.4");
  EXPECT_EQ(unbuilt.level, CheckLevel::warn);
  EXPECT_TRUE(mentions(unbuilt, "built without MPI")) << unbuilt.text;
  EXPECT_EQ(mpi_launcher_check("", "", "").level, CheckLevel::ok);
}

}  // namespace
}  // namespace lj::cli
