// dist/nccl_communicator.h in a CUDA build on a host without a usable GPU (this machine, CI):
// the CUDA probe's reason reaches the user with what to do, and nothing is left half made.
#include <gtest/gtest.h>

#include "backends/cuda/cuda.h"
#include "dist/nccl_communicator.h"

namespace lj {
namespace {

TEST(NcclHost, WithoutAGpuItSaysWhyInsteadOfStarting) {
  const cuda::Probe probe = cuda::probe();
  if (probe.device_count() > 0) GTEST_SKIP() << "a GPU is visible: tests/cuda/gpu/nccl_test.cc";
  ASSERT_FALSE(probe.error.empty());
  SelfCommunicator self;
  auto comm = make_nccl_communicator(self);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::unimplemented) << comm.status().to_string();
  EXPECT_NE(comm.status().message().find("NCCL needs a CUDA device"), std::string::npos);
  EXPECT_NE(comm.status().message().find(probe.error), std::string::npos);
  EXPECT_FALSE(comm.status().hint().empty());
}

}  // namespace
}  // namespace lj
