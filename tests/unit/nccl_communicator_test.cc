// dist/nccl_communicator.h in a build without CUDA: a clear answer, not a crash.
// tests/cuda/nccl_host_test.cc checks a CUDA build on a host without a GPU, and
// tests/cuda/gpu/nccl_test.cc runs the collectives on a GPU.
#include "dist/nccl_communicator.h"

#include <gtest/gtest.h>

#include "backends/cuda/cuda.h"

namespace lj {
namespace {

TEST(NcclCommunicator, ABuildWithoutCudaSaysHowToGetIt) {
  if (cuda::built_with_cuda()) GTEST_SKIP() << "a CUDA build: tests/cuda/nccl_host_test.cc";
  SelfCommunicator self;
  auto comm = make_nccl_communicator(self);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::unimplemented) << comm.status().to_string();
  EXPECT_NE(comm.status().message().find("built without CUDA"), std::string::npos);
  EXPECT_NE(comm.status().hint().find("-DLJ_CUDA=ON"), std::string::npos);
}

}  // namespace
}  // namespace lj
