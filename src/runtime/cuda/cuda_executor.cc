#include "runtime/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "core/log.h"

namespace lj {
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
    : g_(g), ctx_(ctx), life_(g), planned_(planned) {
  output_indices_.resize(g.values().size());
  for (size_t k = 0; k < g.outputs().size(); ++k)
    output_indices_[static_cast<size_t>(g.outputs()[k].value)].push_back(k);
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

struct CudaExecutor::Captured {
  ReplayKey signature;
  cudaGraphExec_t exec = nullptr;
  int64_t kernels = 0;
  std::vector<std::shared_ptr<void>> kept;  // scratch and buffers whose addresses it holds
  struct Output {
    int64_t arena_offset = -1;      // >= 0: a view of the arena
    std::shared_ptr<void> storage;  // else this buffer, one of `kept`
    long owners = 0;                // storage's use_count when nobody outside holds it
    DType dtype = DType::f32;
    std::vector<int64_t> dims;
  };
  std::vector<Output> outputs;
  ~Captured() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  }
};

StatusOr<std::vector<DeviceTensor>> CudaExecutor::run(std::span<const DeviceTensor> inputs) {
  std::vector<FedInput> fed;
  fed.reserve(inputs.size());
  for (const DeviceTensor& t : inputs) fed.push_back(FedInput{true, t.dtype, &t.dims});
  SymEnv env;
  LJ_RETURN_IF_ERROR(bind_inputs(g_, fed, &env));
  if (planned_) LJ_RETURN_IF_ERROR(prepare_arena(env));
  if (graphs_ && planned_ && !capture_failed_ && !output_ready_) {
    ReplayKey sig = signature(env, inputs);
    std::vector<DeviceTensor> out;
    if (captured_ != nullptr && captured_->signature == sig) {
      if (replay_outputs(&out)) {
        LJ_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(captured_->exec, ctx_.stream().get()));
        kernels_launched_ = captured_->kernels;
        ++graph_replays_;
        return out;
      }
    } else if (sig == last_signature_) {
      LJ_ASSIGN_OR_RETURN(const bool captured, capture(env, inputs, &out));
      if (captured) return out;
    }
    last_signature_ = std::move(sig);
  }
  return run_nodes(env, inputs, nullptr);
}

ReplayKey CudaExecutor::signature(const SymEnv& env, std::span<const DeviceTensor> inputs) const {
  std::vector<ReplayInput> in;
  in.reserve(inputs.size());
  for (const DeviceTensor& t : inputs) in.push_back(ReplayInput{t.data(), t.dtype, &t.dims});
  const bool arena = arena_ != nullptr && arena_->size() > 0;
  return make_replay_key(in, arena ? arena_->at(0) : nullptr, arena ? arena_->size() : 0,
                         env.to_string());
}

bool CudaExecutor::replay_outputs(std::vector<DeviceTensor>* out) const {
  out->clear();
  for (const Captured::Output& o : captured_->outputs) {
    if (o.arena_offset >= 0) {
      char* base = static_cast<char*>(arena_->at(0));
      out->push_back(
          DeviceTensor{std::shared_ptr<void>(arena_, base + o.arena_offset), o.dtype, o.dims});
    } else {
      if (o.storage.use_count() > o.owners) return false;  // the last replay's, still held
      out->push_back(DeviceTensor{o.storage, o.dtype, o.dims});
    }
  }
  return true;
}

StatusOr<bool> CudaExecutor::capture(const SymEnv& env, std::span<const DeviceTensor> inputs,
                                     std::vector<DeviceTensor>* out) {
  const cudaStream_t stream = ctx_.stream().get();
  auto cap = std::make_shared<Captured>();
  cap->signature = signature(env, inputs);
  // Relaxed: the caching allocator may still cudaMalloc a block it has not cached yet.
  LJ_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  ctx_.allocator().set_capturing(true);  // no cudaFree while capturing (memory.h)
  StatusOr<std::vector<DeviceTensor>> ran = run_nodes(env, inputs, &cap->kept);
  ctx_.allocator().set_capturing(false);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  cudaError_t made = cudaErrorStreamCaptureInvalidated;
  if (ran.ok() && ended == cudaSuccess && graph != nullptr) {
    made = cudaGraphInstantiate(&cap->exec, graph, 0);
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    (void)cudaGetLastError();  // the failed capture's error is not the next kernel's
    capture_failed_ = true;
    const std::string why = !ran.ok()              ? ran.status().message()
                            : ended != cudaSuccess ? cudaGetErrorString(ended)
                                                   : cudaGetErrorString(made);
    LJ_LOG(warning) << "CUDA graphs: the step could not be captured (" << why
                    << "); every kernel is launched one by one";
    return false;
  }
  cap->kernels = kernels_launched_;
  const char* base =
      arena_ != nullptr && arena_->size() > 0 ? static_cast<const char*>(arena_->at(0)) : nullptr;
  for (const DeviceTensor& t : *ran) {
    Captured::Output o;
    o.dtype = t.dtype;
    o.dims = t.dims;
    const char* p = static_cast<const char*>(t.data());
    if (base != nullptr && p >= base && p < base + arena_->size()) {
      o.arena_offset = p - base;
    } else {
      o.storage = t.storage;
    }
    cap->outputs.push_back(std::move(o));
  }
  // What holds each kept output when the caller has let go: `kept` and the captured outputs.
  for (Captured::Output& o : cap->outputs) {
    if (o.storage == nullptr) continue;
    long in_ran = 0;
    for (const DeviceTensor& t : *ran) in_ran += t.storage == o.storage ? 1 : 0;
    o.owners = o.storage.use_count() - in_ran;
  }
  LJ_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(cap->exec, stream));
  captured_ = std::move(cap);
  *out = std::move(*ran);
  return true;
}

// The CUDA's NodeBackend: values are DeviceTensors (the planned arena's views or the caching
// allocator's buffers); a node runs its NVRTC-compiled fused kernel or the CUDA table's on the
// context's stream. `keep` (capture): every buffer made from the caching allocator is appended
// there instead of going back to the cache, and ids are not checked on the device.
class CudaExecutor::Nodes final : public NodeBackend<DeviceTensor> {
 public:
  Nodes(CudaExecutor& ex, std::vector<std::shared_ptr<void>>* keep)
      : ex_(ex), keep_(keep), kenv_(ex.ctx_.env()) {
    kenv_.check_ids = keep == nullptr;
  }

  Status supports(size_t ni, const Node& n) const override {
    if (ex_.fused_index_[ni] >= 0 || kernels_[n.op] != nullptr) return ok_status();
    return unimplemented(std::string("no CUDA kernel for op ") + op_name(n.op) +
                             (n.op == Op::fused_pointwise ? " (prepare() not called)" : ""),
                         "run with --device cpu");
  }
  TensorView view(const DeviceTensor& t) const override {
    return TensorView{t.data(), t.dtype, t.dims};
  }
  DeviceTensor alias(const DeviceTensor& in, std::vector<int64_t> dims) const override {
    DeviceTensor t = in;
    t.dims = std::move(dims);
    return t;
  }
  StatusOr<DeviceTensor> output(ValueId v, DType dtype, std::vector<int64_t> dims) override {
    const int64_t offset = ex_.planned_ ? ex_.plan_->offset(v) : -1;
    if (offset >= 0) {
      // Its place in the arena; the view shares ownership of the arena.
      char* base = ex_.arena_->size() > 0 ? static_cast<char*>(ex_.arena_->at(0)) : nullptr;
      return DeviceTensor{std::shared_ptr<void>(ex_.arena_, base + offset), dtype, std::move(dims)};
    }
    LJ_ASSIGN_OR_RETURN(DeviceTensor t, device_empty(ex_.ctx_, dtype, std::move(dims)));
    if (keep_ != nullptr) keep_->push_back(t.storage);
    return t;
  }
  Status compute(size_t ni, const Node& n, std::span<const TensorView> in,
                 std::span<TensorView> out) override {
    cuda::AllocatorWorkspace ws(ex_.ctx_.allocator(), keep_);
    KernelContext kc{n, in, out, 1, &ws};
    const int fi = ex_.fused_index_[ni];
    LJ_RETURN_IF_ERROR(fi >= 0 ? ex_.fused_->launch(static_cast<size_t>(fi), kc, kenv_)
                               : kernels_[n.op](kc, kenv_));
    ++ex_.kernels_launched_;
    return ok_status();
  }
  // Tells the caller as soon as a graph output's kernel is queued.
  Status node_done(const Node& n, std::span<const DeviceTensor> vals) override {
    if (!ex_.output_ready_) return ok_status();
    for (ValueId v : n.outputs) {
      for (size_t k : ex_.output_indices_[static_cast<size_t>(v)])
        LJ_RETURN_IF_ERROR(ex_.output_ready_(k, vals[static_cast<size_t>(v)]));
    }
    return ok_status();
  }

 private:
  CudaExecutor& ex_;
  std::vector<std::shared_ptr<void>>* keep_;
  cuda::KernelEnv kenv_;
  const cuda::CudaKernelTable& kernels_ = cuda::kernels();
};

StatusOr<std::vector<DeviceTensor>> CudaExecutor::run_nodes(
    const SymEnv& env, std::span<const DeviceTensor> inputs,
    std::vector<std::shared_ptr<void>>* keep) {
  kernels_launched_ = 0;
  Nodes nodes(*this, keep);
  return run_node_loop<DeviceTensor>(g_, life_, env, inputs, nodes);
}

}  // namespace lj
