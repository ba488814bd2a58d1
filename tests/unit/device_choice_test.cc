// --device auto|cpu|cuda (cli/device_choice.h) and the doctor's CUDA runtime lines
// (cli/doctor_cuda.h) on every kind of host, fed as fake probes.
#include <gtest/gtest.h>

#include "cli/device_choice.h"
#include "cli/doctor_cuda.h"

namespace lj::cli {
namespace {

TEST(DeviceChoice, AutoIsCudaOnlyWhenBuiltWithAGpuAndAnExecutor) {
  DeviceHost h;
  EXPECT_EQ(*choose_device("auto", h), RunDevice::cpu);
  h.built_with_cuda = true;
  EXPECT_EQ(*choose_device("auto", h), RunDevice::cpu);
  h.gpu_count = 1;
  EXPECT_EQ(*choose_device("auto", h), RunDevice::cpu);  // a command that does not run on CUDA
  h.cuda_executor = true;
  EXPECT_EQ(*choose_device("auto", h), RunDevice::cuda);
  EXPECT_EQ(*choose_device("cpu", h), RunDevice::cpu);
  EXPECT_EQ(*choose_device("cuda", h), RunDevice::cuda);
}

TEST(DeviceChoice, CudaThatCannotRunIsOneLineWithAHint) {
  DeviceHost h;
  auto not_built = choose_device("cuda", h);
  ASSERT_FALSE(not_built.ok());
  EXPECT_NE(not_built.status().message().find("built without CUDA"), std::string::npos);
  EXPECT_NE(not_built.status().hint().find("-DLJ_CUDA=ON"), std::string::npos);
  h.built_with_cuda = true;
  h.probe_error = "no NVIDIA driver is loaded";
  auto no_gpu = choose_device("cuda", h);
  ASSERT_FALSE(no_gpu.ok());
  EXPECT_EQ(no_gpu.status().message(), "--device cuda: no GPU here (no NVIDIA driver is loaded)");
  EXPECT_NE(no_gpu.status().hint().find("--device cpu"), std::string::npos);
  h.gpu_count = 8;
  h.command = "ljperf tokenize";
  auto no_executor = choose_device("cuda", h);
  ASSERT_FALSE(no_executor.ok());
  EXPECT_EQ(no_executor.status().message(),
            "--device cuda: ljperf tokenize does not run on the GPU yet");
  for (const auto& s : {not_built.status(), no_gpu.status(), no_executor.status()}) {
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
  EXPECT_FALSE(choose_device("gpu", h).ok());
}

TEST(DoctorCuda, NothingWithoutCudaAndAPlainLineWithoutADriver) {
  cuda::Probe p;
  EXPECT_TRUE(cuda_runtime_lines(p).empty());
  p.built = true;
  p.runtime_version = "13.0";
  const auto lines = cuda_runtime_lines(p);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, CheckLevel::ok);
  EXPECT_NE(lines[0].text.find("no NVIDIA driver and no GPU"), std::string::npos) << lines[0].text;
}

TEST(DoctorCuda, OldDriverFailsWithTheDriverTheBuildNeeds) {
  cuda::Probe p;
  p.built = true;
  p.runtime_version = "13.0";
  p.driver_version = "12.8";
  const auto lines = cuda_runtime_lines(p);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, CheckLevel::fail);
  EXPECT_EQ(lines[0].hint, "upgrade the NVIDIA driver to 580 or newer");
}

TEST(DoctorCuda, EachGpuWithModelMemoryAndArch) {
  cuda::Probe p;
  p.built = true;
  p.runtime_version = "13.0";
  p.driver_version = "13.0";
  p.devices.push_back({0, "NVIDIA H200", int64_t{143771} << 20, 9, 0, 132});
  p.devices.push_back({1, "NVIDIA A100-SXM4-80GB", int64_t{81920} << 20, 8, 0, 108});
  const auto lines = cuda_runtime_lines(p);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].level, CheckLevel::ok);
  EXPECT_EQ(lines[1].level, CheckLevel::ok);
  EXPECT_NE(lines[1].text.find("GPU 0: NVIDIA H200, 140.4 GiB, sm_90 (132 SMs)"), std::string::npos)
      << lines[1].text;
  EXPECT_EQ(lines[2].level, CheckLevel::warn);
  EXPECT_NE(lines[2].hint.find("-DCMAKE_CUDA_ARCHITECTURES=80"), std::string::npos);
}

}  // namespace
}  // namespace lj::cli
