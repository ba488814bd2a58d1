// dist/nccl_communicator.h on a GPU: one rank (bootstrapped over the self communicator), every
// collective on device buffers, checked against what the interface promises. With one rank the
// sums are the rank's own values, so these check the plumbing (counts, offsets, uneven blocks,
// ordering after the compute stream, completion), not NCCL's arithmetic.
#include "dist/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cuda/gpu/gpu_test_util.h"

namespace lj {
namespace {

template <class T>
struct DeviceVec {
  explicit DeviceVec(size_t n) : n(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)), cudaSuccess);
  }
  ~DeviceVec() { (void)cudaFree(p); }
  void put(const std::vector<T>& v) {
    ASSERT_EQ(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    // A pageable copy may return before its DMA lands; NCCL runs on a non-blocking stream.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<T> get() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  std::span<T> span() { return {p, n}; }
  T* p = nullptr;
  size_t n;
};

std::vector<float> iota(size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(NcclGpu, OneRankCollectivesMoveWhatTheInterfaceSays) {
  LJ_REQUIRE_GPU_OR_SKIP(ctx);
  (void)ctx;
  SelfCommunicator self;
  auto made = make_nccl_communicator(self);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  Communicator& nccl = **made;
  EXPECT_STREQ(nccl.backend_name(), "nccl");
  EXPECT_EQ(nccl.world_size(), 1);

  const size_t n = 1000;
  DeviceVec<float> a(n), b(n);
  a.put(iota(n, 1.0f));
  ASSERT_TRUE(nccl.all_reduce_sum(std::span<const float>(a.span()), b.span()).ok());
  EXPECT_EQ(b.get(), iota(n, 1.0f));

  DeviceVec<double> d(3);
  d.put({1.5, -2.0, 1e300});
  ASSERT_TRUE(nccl.all_reduce_sum(std::span<const double>(d.span()), d.span()).ok());  // in place
  EXPECT_EQ(d.get(), (std::vector<double>{1.5, -2.0, 1e300}));

  b.put(std::vector<float>(n, 0.0f));
  ASSERT_TRUE(nccl.reduce_scatter_sum(std::span<const float>(a.span()), b.span()).ok());
  EXPECT_EQ(b.get(), iota(n, 1.0f));
  const std::vector<int64_t> counts = {static_cast<int64_t>(n)};
  b.put(std::vector<float>(n, 0.0f));
  ASSERT_TRUE(
      nccl.ireduce_scatter_sum(std::span<const float>(a.span()), counts, b.span()).wait().ok());
  EXPECT_EQ(b.get(), iota(n, 1.0f));
  b.put(std::vector<float>(n, 0.0f));
  ASSERT_TRUE(nccl.iall_gather(std::span<const float>(a.span()), counts, b.span()).wait().ok());
  EXPECT_EQ(b.get(), iota(n, 1.0f));
  b.put(std::vector<float>(n, 0.0f));
  ASSERT_TRUE(nccl.all_gather(std::span<const float>(a.span()), b.span()).ok());
  EXPECT_EQ(b.get(), iota(n, 1.0f));

  DeviceVec<std::byte> bytes(5);
  ASSERT_TRUE(nccl.broadcast(bytes.span(), 0).ok());
  EXPECT_TRUE(nccl.barrier().ok());

  // Mismatched sizes and a root that does not exist are errors, not undefined behaviour.
  EXPECT_FALSE(nccl.all_reduce_sum(std::span<const float>(a.span()), b.span().first(3)).ok());
  EXPECT_FALSE(nccl.broadcast(bytes.span(), 1).ok());
}

TEST(NcclGpu, CollectiveWaitsForTheComputeStream) {
  LJ_REQUIRE_GPU_OR_SKIP(ctx);
  (void)ctx;
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  SelfCommunicator self;
  NcclOptions options;
  options.compute_stream = compute;
  auto made = make_nccl_communicator(self, options);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  // 64 MiB written on the compute stream just before the reduction: the reduction must see the
  // new values, not the old ones, though the host never synchronised with compute.
  const size_t n = size_t{16} << 20;
  DeviceVec<float> src(n), dst(n);
  const std::vector<float> fresh(n, 3.0f);
  src.put(std::vector<float>(n, -1.0f));
  ASSERT_EQ(
      cudaMemcpyAsync(src.p, fresh.data(), n * sizeof(float), cudaMemcpyHostToDevice, compute),
      cudaSuccess);
  CommHandle h = (*made)->iall_reduce_sum(std::span<const float>(src.span()), dst.span());
  ASSERT_TRUE(h.wait().ok());
  EXPECT_EQ(dst.get(), fresh);
  made->reset();
  (void)cudaStreamDestroy(compute);
}

}  // namespace
}  // namespace lj
