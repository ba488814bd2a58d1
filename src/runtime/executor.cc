#include "runtime/executor.h"

#include <cstdlib>

#include "backends/cpu/cpu.h"
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
  void* get(size_t bytes) override {
    bytes = (bytes + 63) / 64 * 64;
    void* p = nullptr;
    if (used_ + bytes <= *capacity_) {
      p = static_cast<char*>(*base_) + used_;
    } else {
      p = alloc_.allocate_uncached(bytes, MemCategory::workspace);
      LJ_CHECK(p != nullptr) << "out of host memory for " << bytes << " bytes of workspace";
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
    : g_(g), dev_(dev), options_(options) {
  if (options_.planned) planned_ = std::make_unique<ArenaMemory>(g, dev);
  const size_t nv = g.values().size();
  last_use_.assign(nv, -1);
  is_output_.assign(nv, false);
  category_ = value_categories(g);  // passes/memory_plan: the plan counts as this does
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId v : g.nodes()[i].inputs) last_use_[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  for (const auto& o : g.outputs()) is_output_[static_cast<size_t>(o.value)] = true;
  // bf16 / f16 values: the CPU kernels load 16-bit and compute in f32 (natively, or widened
  // around the f32 kernel: backends/cpu/widen.cc), so every op runs on them.
}

Executor::~Executor() {
  dev_.allocator().deallocate_uncached(workspace_, workspace_bytes_, MemCategory::workspace);
}

Status Executor::bind(std::span<const Tensor> inputs) {
  const auto& ins = g_.inputs();
  if (inputs.size() != ins.size()) {
    return invalid_argument("graph takes " + std::to_string(ins.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  }
  env_ = SymEnv();
  // Pass 1 binds single symbols; pass 2 checks every dim under the bindings.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ins.size(); ++i) {
      const TypedShape& want = g_.type(ins[i]);
      const Tensor& t = inputs[i];
      const std::string& name = g_.input_name(ins[i]);
      if (!t.defined()) return invalid_argument("input '" + name + "' is not set");
      if (t.dtype() != want.dtype || static_cast<int>(t.dims().size()) != want.shape.rank()) {
        return invalid_argument("input '" + name + "' is " + dtype_name(t.dtype()) +
                                dims_to_string(t.dims()) + ", the graph declares " +
                                want.to_string());
      }
      for (int d = 0; d < want.shape.rank(); ++d) {
        const Dim& dim = want.shape[d];
        const int64_t fed = t.dims()[static_cast<size_t>(d)];
        if (pass == 0 && dim.coef() == 1 && dim.syms().size() == 1 &&
            env_.get(dim.syms()[0]) == 0) {
          env_.set(dim.syms()[0], fed);
        }
        if (pass == 1 && dim.eval(env_) != fed) {
          return invalid_argument("input '" + name + "' is " + dims_to_string(t.dims()) +
                                  ", the graph declares " + want.shape.to_string() + " with " +
                                  env_.to_string());
        }
      }
    }
  }
  return ok_status();
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
  Status s = fn(ctx);
  if (!s.ok())
    return s.with_context(std::string(op_name(n.op)) + (n.scope.empty() ? "" : " at " + n.scope));
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

StatusOr<std::vector<Tensor>> Executor::execute(std::span<const Tensor> inputs, bool launch) {
  if (launch) LJ_RETURN_IF_ERROR(supported_);
  LJ_RETURN_IF_ERROR(bind(inputs));
  if (planned_) LJ_RETURN_IF_ERROR(planned_->prepare(env_));
  const KernelTable& kernels = cpu::kernels();
  const size_t nv = g_.values().size();
  std::vector<Tensor> vals(nv);
  for (size_t i = 0; i < g_.inputs().size(); ++i)
    vals[static_cast<size_t>(g_.inputs()[i])] = inputs[i];
  kernels_launched_ = 0;

  std::vector<TensorView> in_views, out_views;
  std::vector<int64_t> dims;
  for (size_t ni = 0; ni < g_.nodes().size(); ++ni) {
    const Node& n = g_.nodes()[ni];
    if (n.op == Op::input) continue;
    const OpDef& def = op_def(n.op);
    if (def.has(kAlias)) {
      const ValueId out = n.outputs[0];
      LJ_CHECK(g_.type(out).shape.eval(env_, &dims)) << "unbound symbol";
      vals[static_cast<size_t>(out)] = vals[static_cast<size_t>(n.inputs[0])].reshaped(dims);
      if (launch && def.has(kAliasLaunch)) {
        // A collective's wait on the storage its start received into (graph/op.h).
        const KernelFn fn = kernels[n.op];
        const bool own = ni < node_kernels_.size() && node_kernels_[ni];
        if (!own && fn == nullptr)
          return unimplemented(std::string("no CPU kernel for op ") + def.name);
        in_views.assign({vals[static_cast<size_t>(n.inputs[0])].view()});
        out_views.assign({vals[static_cast<size_t>(out)].view()});
        LJ_RETURN_IF_ERROR(
            launch_kernel(n, own ? node_kernels_[ni] : NodeKernel(fn), in_views, out_views));
        if (after_kernel_) after_kernel_();
      }
      if (!launch && dry_hook_ && def.has(kAliasLaunch)) dry_hook_(ni);
    } else {
      const KernelFn fn = kernels[n.op];
      if (fn == nullptr) return unimplemented(std::string("no CPU kernel for op ") + def.name);
      in_views.clear();
      out_views.clear();
      for (ValueId v : n.inputs) in_views.push_back(vals[static_cast<size_t>(v)].view());
      for (ValueId v : n.outputs) {
        const TypedShape& t = g_.type(v);
        LJ_CHECK(t.shape.eval(env_, &dims)) << "unbound symbol in " << t.to_string();
        const MemCategory c = category_[static_cast<size_t>(v)];
        vals[static_cast<size_t>(v)] =
            planned_ ? planned_->output(v, t.dtype, dims) : Tensor::empty(dev_, t.dtype, dims, c);
        out_views.push_back(vals[static_cast<size_t>(v)].view());
      }
      if (!launch) {
        const KernelTable& sizes =
            options_.dry_workspace_sizes ? *options_.dry_workspace_sizes : kernels;
        if (const WorkspaceFn ws = sizes.workspace(n.op))
          dry_workspace(ws(n, in_views, dev_.threads()));
        if (dry_hook_) dry_hook_(ni);
      }
      if (launch) {
        const bool own = ni < node_kernels_.size() && node_kernels_[ni];
        LJ_RETURN_IF_ERROR(
            launch_kernel(n, own ? node_kernels_[ni] : NodeKernel(fn), in_views, out_views));
        if (after_kernel_) after_kernel_();
      }
    }
    // Free what this node read for the last time, and outputs nobody reads.
    for (ValueId v : n.inputs) {
      const auto k = static_cast<size_t>(v);
      if (last_use_[k] == static_cast<int>(ni) && !is_output_[k]) vals[k] = Tensor();
    }
    for (ValueId v : n.outputs) {
      const auto k = static_cast<size_t>(v);
      if (last_use_[k] < 0 && !is_output_[k]) vals[k] = Tensor();
    }
  }

  std::vector<Tensor> outs;
  outs.reserve(g_.outputs().size());
  for (const auto& o : g_.outputs()) outs.push_back(vals[static_cast<size_t>(o.value)]);
  return outs;
}

}  // namespace lj
