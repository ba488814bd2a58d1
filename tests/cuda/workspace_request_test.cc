// The CUDA kernels' scratch on the host (no GPU needed; label cuda_tests): each kernel that asks
// for scratch makes one request through Workspace::acquire, before it launches anything, of
// what backends/cuda/workspace.h's workspace_sizes() prices for the GPU memory prediction; and
// when the device has no room the kernel returns resource_exhausted instead of aborting the
// process (issue 32: AllocatorWorkspace::get used to LJ_CHECK the allocation).
// The kernels run with null device pointers: a workspace that refuses every request stops them
// before their first CUDA call, which is what the tests check (a launch on this GPU-less host
// would fail with a CUDA error instead, and a device would fault on the null pointers).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/kernels.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/workspace.h"

namespace lj::cuda {
namespace {

// Records every request and refuses it, as an allocator out of device memory would.
class RefusingWorkspace final : public Workspace {
 public:
  StatusOr<void*> acquire(size_t bytes) override {
    requests.push_back(bytes);
    return resource_exhausted("refused " + std::to_string(bytes) + " bytes", "a test");
  }
  std::vector<size_t> requests;
};

TensorView view(DType dt, std::vector<int64_t> dims) {
  return TensorView{nullptr, dt, std::move(dims)};
}

struct Case {
  std::string name;
  Node node;
  std::vector<TensorView> in, out;
};

// The kernel's requests under a refusing workspace, after checking it returned that refusal.
std::vector<size_t> requests_of(Case& k) {
  RefusingWorkspace ws;
  KernelContext c{k.node, k.in, k.out, 1, &ws};
  const CudaKernelFn fn = kernels()[k.node.op];
  EXPECT_NE(fn, nullptr) << k.name;
  if (fn == nullptr) return {};
  KernelEnv env;  // no stream, no cuBLASLt: nothing may be launched before the request
  const Status s = fn(c, env);
  EXPECT_EQ(s.code(), StatusCode::resource_exhausted) << k.name << ": " << s.to_string();
  return ws.requests;
}

size_t priced(const Case& k) {
  const WorkspaceFn fn = workspace_sizes().workspace(k.node.op);
  return fn == nullptr ? 0 : fn(k.node, k.in, 1);
}

Node node(Op op, Attrs attrs = {}) {
  Node n{op, {}, {}, std::move(attrs), "", Phase::forward};
  return n;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const auto add = [&](std::string name, Node n, std::vector<TensorView> in,
                       std::vector<TensorView> out) {
    v.push_back(Case{std::move(name), std::move(n), std::move(in), std::move(out)});
  };
  // llama3.2-1b's head: rows 8192 (batch 4 x 2048), hidden 2048, vocabulary 128256; bf16 takes
  // 1024-row chunks (workspace.h), so dw's f32 sum is in the request.
  const int64_t rows = 8192, cols = 2048, vocab = 128256;
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string tag = dtype_name(dt);
    add("linear_cross_entropy " + tag, node(Op::linear_cross_entropy),
        {view(dt, {rows, cols}), view(dt, {vocab, cols}), view(DType::i32, {rows})},
        {view(DType::f32, {}), view(dt, {rows, cols}), view(dt, {vocab, cols})});
  }
  Attrs chunk7;
  chunk7.set("chunk", int64_t{7});
  add("linear_cross_entropy bf16, one chunk", node(Op::linear_cross_entropy, chunk7),
      {view(DType::bf16, {7, 16}), view(DType::bf16, {50, 16}), view(DType::i64, {7})},
      {view(DType::f32, {}), view(DType::bf16, {7, 16}), view(DType::bf16, {50, 16})});
  add("cross_entropy", node(Op::cross_entropy),
      {view(DType::bf16, {300, 1000}), view(DType::i64, {300})}, {view(DType::f32, {})});
  add("cross_entropy_backward", node(Op::cross_entropy_backward),
      {view(DType::f32, {300, 1000}), view(DType::i32, {300}), view(DType::f32, {})},
      {view(DType::f32, {300, 1000})});
  Attrs causal;
  causal.set("causal", true);
  for (DType dt : {DType::f32, DType::bf16}) {
    const TensorView q = view(dt, {2, 8, 256, 64}), kv = view(dt, {2, 2, 256, 64});
    add(std::string("sdpa_backward ") + dtype_name(dt), node(Op::sdpa_backward, causal),
        {q, kv, kv, q, view(DType::f32, {2, 8, 256}), q}, {q, kv, kv});
  }
  add("gather", node(Op::gather), {view(DType::bf16, {vocab, cols}), view(DType::i32, {4, 2048})},
      {view(DType::bf16, {4, 2048, cols})});
  for (DType dt : {DType::f32, DType::bf16}) {
    Attrs shape;
    shape.set("shape", Shape::concrete({vocab, cols}));
    add(std::string("scatter_add ") + dtype_name(dt), node(Op::scatter_add, shape),
        {view(DType::i64, {4, 2048}), view(dt, {4, 2048, cols})}, {view(dt, {vocab, cols})});
  }
  return v;
}

TEST(CudaWorkspaceRequest, EachKernelAsksOnceForWhatThePredictionPrices) {
  for (Case& k : cases()) {
    const std::vector<size_t> got = requests_of(k);
    ASSERT_EQ(got.size(), 1u) << k.name << ": one request, before any launch";
    EXPECT_EQ(got[0], priced(k)) << k.name << ": workspace_sizes() prices another size";
    EXPECT_GT(got[0], 0u) << k.name;
  }
}

// The figures themselves at llama3.2-1b's shape: the bf16 head's f32 dw sum (1.05 GB) and the
// bf16 embedding gradient's f32 sum are in the prediction (they were not before).
TEST(CudaWorkspaceRequest, Bf16HeadAndEmbeddingSumsArePriced) {
  const int64_t rows = 8192, cols = 2048, vocab = 128256;
  const int64_t chunk = linear_cross_entropy_chunk(Attrs{}, rows, vocab);
  const size_t logits = static_cast<size_t>(chunk * vocab);
  const size_t f32_head = linear_cross_entropy_scratch(rows, cols, vocab, chunk, false).total;
  const size_t bf16_head = linear_cross_entropy_scratch(rows, cols, vocab, chunk, true).total;
  EXPECT_GE(f32_head, loss_scratch_bytes(rows) + logits * 4);
  EXPECT_LT(f32_head, loss_scratch_bytes(rows) + logits * 4 + 2 * ScratchLayout::kAlign);
  EXPECT_GE(bf16_head, f32_head + logits * 2 + static_cast<size_t>(vocab * cols) * 4);
  // One chunk holds every row: bf16 dw is written once, no f32 sum.
  EXPECT_FALSE(linear_cross_entropy_scratch(7, 16, 50, 7, true).has_dw32);
  const ScatterAddScratch emb = scatter_add_scratch(rows, vocab, cols, 8, true);
  EXPECT_TRUE(emb.has_acc && emb.sorted);
  EXPECT_GE(emb.total, static_cast<size_t>(vocab * cols) * 4 + static_cast<size_t>(rows) * 16);
  EXPECT_FALSE(scatter_add_scratch(rows, vocab, cols, 8, false).has_acc);
  // Parts are 256-byte aligned and do not overlap.
  EXPECT_EQ(emb.acc % ScratchLayout::kAlign, 0u);
  EXPECT_GE(emb.acc, sizeof(long long));
  EXPECT_GE(emb.keys, emb.acc + static_cast<size_t>(vocab * cols) * 4);
  EXPECT_GE(emb.pos_in, emb.keys + static_cast<size_t>(rows) * 8);
  EXPECT_GE(emb.pos, emb.pos_in + static_cast<size_t>(rows) * 4);
}

// Host memory with a capacity, standing in for the device.
class SmallDevice final : public MemorySource {
 public:
  explicit SmallDevice(size_t capacity) : left_(capacity) {}
  ~SmallDevice() override { EXPECT_TRUE(blocks_.empty()) << "blocks leaked"; }
  Status allocate(size_t bytes, void** p) override {
    if (bytes > left_) {
      return resource_exhausted("small device is out of memory", "`ljperf plan` predicts the peak");
    }
    left_ -= bytes;
    *p = std::malloc(bytes);
    blocks_[*p] = bytes;
    return ok_status();
  }
  void free(void* p) override {
    left_ += blocks_.at(p);
    blocks_.erase(p);
    std::free(p);
  }
  void memory_info(int64_t* bytes_free, int64_t* bytes_total) override {
    *bytes_free = static_cast<int64_t>(left_);
    *bytes_total = 0;
  }

 private:
  size_t left_;
  std::map<void*, size_t> blocks_;
};

// The executor's path: a kernel's request through AllocatorWorkspace and the caching allocator.
// Out of memory the kernel returns the allocator's error (message and hint), nothing stays in
// use, and under capture nothing is kept.
TEST(CudaWorkspaceRequest, OutOfDeviceMemoryIsAnErrorNotAnAbort) {
  SmallDevice dev(1 << 20);
  CachingAllocator alloc(dev);
  Case head = cases()[1];  // linear_cross_entropy bf16 at llama3.2-1b: over a GiB of scratch
  for (bool capturing : {false, true}) {
    std::vector<std::shared_ptr<void>> kept;
    Status s;
    {
      AllocatorWorkspace ws(alloc, capturing ? &kept : nullptr);
      KernelContext c{head.node, head.in, head.out, 1, &ws};
      s = kernels()[head.node.op](c, KernelEnv{});
    }
    ASSERT_EQ(s.code(), StatusCode::resource_exhausted) << s.to_string();
    EXPECT_NE(s.message().find("GPU workspace of " + std::to_string(priced(head)) + " bytes"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("small device is out of memory"), std::string::npos);
    EXPECT_EQ(s.hint(), "`ljperf plan` predicts the peak");
    EXPECT_TRUE(kept.empty());
    EXPECT_EQ(alloc.stats().bytes_in_use, 0);
  }
  // What fits is handed out, and returned when the kernel call ends (or kept, under capture).
  std::vector<std::shared_ptr<void>> kept;
  {
    AllocatorWorkspace ws(alloc);
    StatusOr<void*> p = ws.acquire(4096);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(alloc.stats().bytes_in_use, 4096);
    AllocatorWorkspace keeping(alloc, &kept);
    ASSERT_TRUE(keeping.acquire(1000).ok());
    EXPECT_FALSE(keeping.acquire(size_t{2} << 20).ok());
  }
  EXPECT_EQ(kept.size(), 1u);
  EXPECT_EQ(alloc.stats().bytes_in_use, 1024);
  kept.clear();
  EXPECT_EQ(alloc.stats().bytes_in_use, 0);
}

}  // namespace
}  // namespace lj::cuda
