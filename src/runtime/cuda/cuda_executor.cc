#include "runtime/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"

namespace lj {
namespace {

// Kernel scratch from the caching allocator, returned when the kernel call ends (the blocks go
// back to the cache; later kernels on the same stream reuse them in order).
class DeviceWorkspace final : public Workspace {
 public:
  explicit DeviceWorkspace(cuda::CachingAllocator& a) : a_(a) {}
  ~DeviceWorkspace() override {
    for (void* p : blocks_) a_.deallocate(p);
  }
  void* get(size_t bytes) override {
    StatusOr<void*> p = a_.allocate(bytes);
    LJ_CHECK(p.ok()) << "GPU workspace: " << p.status().message();
    blocks_.push_back(*p);
    return *p;
  }

 private:
  cuda::CachingAllocator& a_;
  std::vector<void*> blocks_;
};

}  // namespace

StatusOr<DeviceTensor> device_empty(cuda::Context& ctx, DType dtype, std::vector<int64_t> dims) {
  DeviceTensor t{nullptr, dtype, std::move(dims)};
  LJ_ASSIGN_OR_RETURN(void* p, ctx.allocator().allocate(t.bytes()));
  cuda::CachingAllocator* a = &ctx.allocator();
  t.storage = std::shared_ptr<void>(p, [a](void* q) { a->deallocate(q); });
  return t;
}

StatusOr<DeviceTensor> device_from_host(cuda::Context& ctx, DType dtype, std::vector<int64_t> dims,
                                        const void* host) {
  LJ_ASSIGN_OR_RETURN(DeviceTensor t, device_empty(ctx, dtype, std::move(dims)));
  if (t.bytes() > 0) {
    LJ_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(t.data(), host, t.bytes(), cudaMemcpyHostToDevice, ctx.stream().get()));
    LJ_RETURN_IF_ERROR(ctx.synchronize());
  }
  return t;
}

Status device_to_host(const DeviceTensor& t, void* host) {
  if (t.bytes() == 0) return ok_status();
  return cuda::cuda_status(cudaMemcpy(host, t.data(), t.bytes(), cudaMemcpyDeviceToHost),
                           "cudaMemcpy (device to host)");
}

CudaExecutor::CudaExecutor(const Graph& g, cuda::Context& ctx, bool planned)
    : g_(g), ctx_(ctx), planned_(planned) {
  last_use_.assign(g.values().size(), -1);
  is_output_.assign(g.values().size(), false);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (ValueId v : g.nodes()[i].inputs) last_use_[static_cast<size_t>(v)] = static_cast<int>(i);
  for (const auto& o : g.outputs()) is_output_[static_cast<size_t>(o.value)] = true;
  fused_index_.assign(g.nodes().size(), -1);
}

Status CudaExecutor::prepare(codegen::CudaKernelCache& cache) {
  std::map<std::string, int> index;
  std::vector<codegen::Kernel> kernels;
  for (size_t i = 0; i < g_.nodes().size(); ++i) {
    const Node& n = g_.nodes()[i];
    if (n.op != Op::fused_pointwise) continue;
    const std::string& text = n.attrs.s("kernel");
    auto it = index.find(text);
    if (it == index.end()) {
      LJ_ASSIGN_OR_RETURN(codegen::Kernel k, codegen::parse_kernel(text));
      it = index.emplace(text, static_cast<int>(kernels.size())).first;
      kernels.push_back(std::move(k));
    }
    fused_index_[i] = it->second;
  }
  if (kernels.empty()) return ok_status();
  LJ_ASSIGN_OR_RETURN(fused_, cuda::FusedKernels::load(kernels, cache));
  return ok_status();
}

Status CudaExecutor::prepare_arena(const SymEnv& env) {
  if (plan_ == nullptr || !(plan_->env == env)) {
    plan_ = nullptr;
    for (const auto& p : plans_) {
      if (p->env == env) plan_ = p.get();
    }
    if (plan_ == nullptr) {
      LJ_ASSIGN_OR_RETURN(MemoryPlan p, plan_memory(g_, env));
      plans_.push_back(std::make_unique<MemoryPlan>(std::move(p)));
      plan_ = plans_.back().get();
    }
    arena_.reset();
  }
  const auto bytes = static_cast<size_t>(plan_->bytes_arena);
  // A held output of the last run keeps its arena: this run gets a new one.
  if (arena_ == nullptr || arena_.use_count() > 1 || arena_->size() != bytes) {
    arena_.reset();
    LJ_ASSIGN_OR_RETURN(std::unique_ptr<cuda::Arena> a, cuda::Arena::create(ctx_.source(), bytes));
    arena_ = std::shared_ptr<cuda::Arena>(std::move(a));
    arena_bytes_peak_ = std::max(arena_bytes_peak_, static_cast<int64_t>(bytes));
  }
  return ok_status();
}

StatusOr<std::vector<DeviceTensor>> CudaExecutor::run(std::span<const DeviceTensor> inputs) {
  const auto& ins = g_.inputs();
  if (inputs.size() != ins.size()) {
    return invalid_argument("graph takes " + std::to_string(ins.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  }
  SymEnv env;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ins.size(); ++i) {
      const TypedShape& want = g_.type(ins[i]);
      const DeviceTensor& t = inputs[i];
      if (t.dtype != want.dtype || static_cast<int>(t.dims.size()) != want.shape.rank()) {
        return invalid_argument("input '" + g_.input_name(ins[i]) + "' is " + dtype_name(t.dtype) +
                                dims_to_string(t.dims) + ", the graph declares " +
                                want.to_string());
      }
      for (int d = 0; d < want.shape.rank(); ++d) {
        const Dim& dim = want.shape[d];
        const int64_t fed = t.dims[static_cast<size_t>(d)];
        if (pass == 0 && dim.coef() == 1 && dim.syms().size() == 1 && env.get(dim.syms()[0]) == 0) {
          env.set(dim.syms()[0], fed);
        }
        if (pass == 1 && dim.eval(env) != fed) {
          return invalid_argument("input '" + g_.input_name(ins[i]) + "' is " +
                                  dims_to_string(t.dims) + ", the graph declares " +
                                  want.shape.to_string());
        }
      }
    }
  }
  if (planned_) LJ_RETURN_IF_ERROR(prepare_arena(env));
  const cuda::CudaKernelTable& kernels = cuda::kernels();
  std::vector<DeviceTensor> vals(g_.values().size());
  for (size_t i = 0; i < ins.size(); ++i) vals[static_cast<size_t>(ins[i])] = inputs[i];
  kernels_launched_ = 0;
  std::vector<TensorView> iv, ov;
  std::vector<int64_t> dims;
  for (size_t ni = 0; ni < g_.nodes().size(); ++ni) {
    const Node& n = g_.nodes()[ni];
    if (n.op == Op::input) continue;
    const OpDef& def = op_def(n.op);
    if (def.has(kAlias)) {
      const ValueId out = n.outputs[0];
      LJ_CHECK(g_.type(out).shape.eval(env, &dims)) << "unbound symbol";
      DeviceTensor t = vals[static_cast<size_t>(n.inputs[0])];
      t.dims = dims;
      vals[static_cast<size_t>(out)] = std::move(t);
    } else {
      const cuda::CudaKernelFn fn = kernels[n.op];
      const int fi = fused_index_[ni];
      if (fi < 0 && fn == nullptr) {
        return unimplemented(std::string("no CUDA kernel for op ") + def.name +
                                 (n.op == Op::fused_pointwise ? " (prepare() not called)" : ""),
                             "run with --device cpu");
      }
      iv.clear();
      ov.clear();
      for (ValueId v : n.inputs) {
        const DeviceTensor& t = vals[static_cast<size_t>(v)];
        iv.push_back(TensorView{t.data(), t.dtype, t.dims});
      }
      for (ValueId v : n.outputs) {
        const TypedShape& t = g_.type(v);
        LJ_CHECK(t.shape.eval(env, &dims)) << "unbound symbol in " << t.to_string();
        const int64_t offset = planned_ ? plan_->offset(v) : -1;
        if (offset >= 0) {
          // Its place in the arena; the view shares ownership of the arena.
          char* base = arena_->size() > 0 ? static_cast<char*>(arena_->at(0)) : nullptr;
          vals[static_cast<size_t>(v)] =
              DeviceTensor{std::shared_ptr<void>(arena_, base + offset), t.dtype, dims};
        } else {
          LJ_ASSIGN_OR_RETURN(vals[static_cast<size_t>(v)], device_empty(ctx_, t.dtype, dims));
        }
        const DeviceTensor& d = vals[static_cast<size_t>(v)];
        ov.push_back(TensorView{d.data(), d.dtype, d.dims});
      }
      DeviceWorkspace ws(ctx_.allocator());
      KernelContext kc{n, iv, ov, 1, &ws};
      Status s =
          fi >= 0 ? fused_->launch(static_cast<size_t>(fi), kc, ctx_.env()) : fn(kc, ctx_.env());
      if (!s.ok())
        return s.with_context(std::string(def.name) + (n.scope.empty() ? "" : " at " + n.scope));
      ++kernels_launched_;
    }
    // Values whose last reader this was go back to the cache (not graph outputs or inputs).
    for (ValueId v : n.inputs) {
      const size_t k = static_cast<size_t>(v);
      if (last_use_[k] == static_cast<int>(ni) && !is_output_[k]) vals[k] = DeviceTensor{};
    }
  }
  std::vector<DeviceTensor> out;
  for (const auto& o : g_.outputs()) out.push_back(vals[static_cast<size_t>(o.value)]);
  return out;
}

}  // namespace lj
