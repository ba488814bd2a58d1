#include "runtime/executor.h"

#include <cstdlib>
#include <string>

#include "backends/cpu/cpu.h"
#include "backends/cuda/workspace.h"
#include "core/check.h"
#include "core/units.h"

namespace lj {
namespace {

// Kernel scratch: one buffer held by the executor and reused by every kernel (as cuBLAS keeps
// its workspace), bump-allocated within a call. When a call needs more than the buffer holds,
// the extra comes from separate blocks, and the buffer then grows to what the call needed, so
// it settles at the largest need after the first step. Allocated uncached: it never changes
// which cached blocks tensors get.
class ArenaWorkspace final : public Workspace {
 public:
  ArenaWorkspace(CachingAllocator& alloc, void** base, size_t* capacity)
      : alloc_(alloc), base_(base), capacity_(capacity) {}
  ~ArenaWorkspace() override {
    for (auto& [p, n] : extra_) alloc_.deallocate_uncached(p, n, MemCategory::workspace);
    if (!extra_.empty()) {
      alloc_.deallocate_uncached(*base_, *capacity_, MemCategory::workspace);
      *capacity_ = used_;
      *base_ = alloc_.allocate_uncached(*capacity_, MemCategory::workspace);
      LJ_CHECK(*base_ != nullptr) << "out of host memory for " << *capacity_
                                  << " bytes of workspace";
    }
  }
  StatusOr<void*> acquire(size_t bytes) override {
    bytes = (bytes + 63) / 64 * 64;
    void* p = nullptr;
    if (used_ + bytes <= *capacity_) {
      p = static_cast<char*>(*base_) + used_;
    } else {
      p = alloc_.allocate_uncached(bytes, MemCategory::workspace);
      if (p == nullptr) {
        return resource_exhausted("out of host memory for " + std::to_string(bytes) +
                                  " bytes of kernel workspace");
      }
      extra_.emplace_back(p, bytes);
    }
    used_ += bytes;
    return p;
  }

 private:
  CachingAllocator& alloc_;
  void** base_;
  size_t* capacity_;
  size_t used_ = 0;
  std::vector<std::pair<void*, size_t>> extra_;
};

}  // namespace

Executor::Executor(const Graph& g, Device& dev, ExecutorOptions options)
    : g_(g), dev_(dev), options_(options), life_(g) {
  if (options_.planned) planned_ = std::make_unique<ArenaMemory>(g, dev);
  category_ = value_categories(g);  // passes/memory_plan: the plan counts as this does
  // bf16 / f16 values: the CPU kernels load 16-bit and compute in f32 (natively, or widened
  // around the f32 kernel: backends/cpu/widen.cc), so every op runs on them.
}

Executor::~Executor() {
  dev_.allocator().deallocate_uncached(workspace_, workspace_bytes_, MemCategory::workspace);
}

StatusOr<std::vector<Tensor>> Executor::run(std::span<const Tensor> inputs) {
  LJ_CHECK(!dev_.is_virtual()) << "run() on a virtual device; use dry_run()";
  return execute(inputs, /*launch=*/true);
}

StatusOr<std::vector<Tensor>> Executor::dry_run(std::span<const Tensor> inputs) {
  return execute(inputs, /*launch=*/false);
}

// What ArenaWorkspace does for a call that asks for `bytes` in one get(): beyond the held
// buffer, an extra block for the call, then the buffer regrown to the call's need.
void Executor::dry_workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return;
  CachingAllocator& alloc = dev_.allocator();
  void* extra = alloc.allocate_uncached(bytes, MemCategory::workspace);
  alloc.deallocate_uncached(extra, bytes, MemCategory::workspace);
  if (workspace_bytes_ > 0)
    alloc.deallocate_uncached(workspace_, workspace_bytes_, MemCategory::workspace);
  workspace_bytes_ = bytes;
  workspace_ = alloc.allocate_uncached(bytes, MemCategory::workspace);
}

void Executor::set_node_kernel(size_t node_index, NodeKernel k) {
  if (node_kernels_.size() <= node_index) node_kernels_.resize(node_index + 1);
  node_kernels_[node_index] = std::move(k);
}

Status Executor::launch_kernel(const Node& n, const NodeKernel& fn, std::span<const TensorView> in,
                               std::span<TensorView> out) {
  ArenaWorkspace ws(dev_.allocator(), &workspace_, &workspace_bytes_);
  KernelContext ctx{n, in, out, dev_.threads(), &ws};
  const auto clock = [&] {
    return options_.profile_cpu ? process_cpu_seconds() / dev_.threads() : now_seconds();
  };
  const double t0 = options_.profile ? clock() : 0.0;
  LJ_RETURN_IF_ERROR(fn(ctx));
  ++kernels_launched_;
  if (options_.profile) {
    const double dt = clock() - t0;
    OpProfile* p = nullptr;
    for (auto& e : profile_) {
      if (e.op == n.op && e.phase == n.phase) p = &e;
    }
    if (p == nullptr) p = &profile_.emplace_back(OpProfile{n.op, n.phase});
    ++p->calls;
    p->seconds += dt;
    p->flops += node_cost(g_, n, env_).flops;
  }
  return ok_status();
}

// The CPU's NodeBackend: values are Tensors on dev_ (the planned arena's or the caching
// allocator's); a node runs its bound kernel (set_node_kernel) or the CPU table's, and a dry run
// replays each kernel's workspace and the dry hook instead.
class Executor::Nodes final : public NodeBackend<Tensor> {
 public:
  Nodes(Executor& ex, bool launch) : ex_(ex), launch_(launch) {}

  Status supports(size_t ni, const Node& n) const override {
    if (own(ni) || kernels_[n.op] != nullptr) return ok_status();
    return unimplemented(std::string("no CPU kernel for op ") + op_name(n.op));
  }
  TensorView view(const Tensor& t) const override { return t.view(); }
  Tensor alias(const Tensor& in, std::vector<int64_t> dims) const override {
    return in.reshaped(std::move(dims));
  }
  StatusOr<Tensor> output(ValueId v, DType dtype, std::vector<int64_t> dims) override {
    if (ex_.planned_) return ex_.planned_->output(v, dtype, std::move(dims));
    return Tensor::empty(ex_.dev_, dtype, std::move(dims), ex_.category_[static_cast<size_t>(v)]);
  }
  Status compute(size_t ni, const Node& n, std::span<const TensorView> in,
                 std::span<TensorView> out) override {
    if (!launch_) {
      const KernelTable& sizes =
          ex_.options_.dry_workspace_sizes ? *ex_.options_.dry_workspace_sizes : kernels_;
      const WorkspaceFn ws = op_def(n.op).has(kAlias) ? nullptr : sizes.workspace(n.op);
      if (ws != nullptr) ex_.dry_workspace(ws(n, in, ex_.dev_.threads()));
      if (ex_.dry_hook_) ex_.dry_hook_(ni);
      return ok_status();
    }
    LJ_RETURN_IF_ERROR(ex_.launch_kernel(
        n, own(ni) ? ex_.node_kernels_[ni] : NodeKernel(kernels_[n.op]), in, out));
    if (ex_.after_kernel_) ex_.after_kernel_();
    return ok_status();
  }

 private:
  bool own(size_t ni) const { return ni < ex_.node_kernels_.size() && ex_.node_kernels_[ni]; }
  Executor& ex_;
  bool launch_;
  const KernelTable& kernels_ = cpu::kernels();
};

StatusOr<std::vector<Tensor>> Executor::execute(std::span<const Tensor> inputs, bool launch) {
  std::vector<FedInput> fed;
  fed.reserve(inputs.size());
  for (const Tensor& t : inputs) fed.push_back(FedInput{t.defined(), t.dtype(), &t.dims()});
  LJ_RETURN_IF_ERROR(bind_inputs(g_, fed, &env_));
  if (planned_) LJ_RETURN_IF_ERROR(planned_->prepare(env_));
  kernels_launched_ = 0;
  Nodes nodes(*this, launch);
  return run_node_loop<Tensor>(g_, life_, env_, inputs, nodes);
}

const KernelTable& cuda_workspace_sizes() {
  return cuda::workspace_sizes();
}

}  // namespace lj
