#include "cuda/gpu/gpu_test_util.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <map>

#include "backends/cuda/kernels.h"
#include "graph/ir.h"
#include "runtime/tensor.h"

namespace lj::test {
bool gpu_required() {
  const char* v = std::getenv("LJ_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

cuda::Context* gpu_context(std::string* why) {
  static std::string reason;
  // Made once and never destroyed: its blocks would otherwise be freed after the CUDA runtime
  // has shut down at exit.
  static cuda::Context* ctx = [] {
    auto c = cuda::Context::create(0);
    if (!c.ok()) {
      reason = c.status().message();
      return static_cast<cuda::Context*>(nullptr);
    }
    return c->release();
  }();
  *why = reason;
  return ctx;
}

std::shared_ptr<void> to_device(cuda::Context& ctx, const void* data, size_t bytes) {
  auto p = ctx.allocator().allocate(bytes);
  LJ_CHECK(p.ok()) << p.status().message();
  LJ_CHECK(cudaMemcpy(*p, data, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  // A pageable copy may still be in flight when cudaMemcpy returns, and the kernels run on a
  // non-blocking stream that does not wait for the legacy one.
  LJ_CHECK(cudaDeviceSynchronize() == cudaSuccess);
  cuda::Context* c = &ctx;
  return std::shared_ptr<void>(*p, [c](void* q) { c->allocator().deallocate(q); });
}

void from_device(void* host, const void* device, size_t bytes) {
  LJ_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
}

StatusOr<std::vector<RefTensor>> run_graph_cuda(cuda::Context& ctx,
                                                const std::vector<GraphInput>& inputs,
                                                const BuildFn& build) {
  Graph g;
  Builder b(&g);
  std::vector<Val> in;
  for (const GraphInput& gi : inputs)
    in.push_back(b.input(gi.name, gi.value.dtype, Shape::concrete(gi.value.dims)));
  std::vector<Val> outs = build(b, in);
  if (!b.ok()) return b.status();
  for (size_t i = 0; i < outs.size(); ++i) b.output("out" + std::to_string(i), outs[i]);
  LJ_RETURN_IF_ERROR(verify(g));

  Device host(1);
  std::map<ValueId, std::shared_ptr<void>> buf;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor t = Tensor::from_doubles(host, inputs[i].value.dtype, inputs[i].value.dims,
                                          inputs[i].value.data);
    buf[g.inputs()[i]] = to_device(ctx, t.raw(), t.bytes());
  }
  auto view = [&](ValueId v) {
    const TypedShape& ts = g.value(v).type;
    return TensorView{buf.at(v).get(), ts.dtype, ts.shape.concrete_dims()};
  };
  for (const Node& n : g.nodes()) {
    if (n.op == Op::input) continue;
    const cuda::CudaKernelFn fn = cuda::kernels()[n.op];
    if (fn == nullptr) return unimplemented(std::string("no CUDA kernel for ") + op_name(n.op));
    std::vector<TensorView> iv, ov;
    for (ValueId v : n.inputs) iv.push_back(view(v));
    for (ValueId v : n.outputs) {
      const TypedShape& ts = g.value(v).type;
      const size_t bytes = static_cast<size_t>(numel_of(ts.shape.concrete_dims())) *
                           static_cast<size_t>(dtype_size(ts.dtype));
      auto p = ctx.allocator().allocate(bytes);
      LJ_RETURN_IF_ERROR(p.status());
      cuda::Context* c = &ctx;
      buf[v] = std::shared_ptr<void>(*p, [c](void* q) { c->allocator().deallocate(q); });
      ov.push_back(view(v));
    }
    cuda::AllocatorWorkspace ws(ctx.allocator());
    KernelContext kc{n, iv, ov, 1, &ws};
    LJ_RETURN_IF_ERROR(fn(kc, ctx.env()));
    LJ_RETURN_IF_ERROR(ctx.synchronize());
  }
  std::vector<RefTensor> result;
  for (const NamedValue& o : g.outputs()) {
    const TensorView v = view(o.value);
    Tensor t = Tensor::empty(host, v.dtype, v.dims, MemCategory::temporaries);
    from_device(t.raw(), v.data, t.bytes());
    result.push_back(RefTensor{t.dtype(), t.dims(), t.to_doubles()});
  }
  return result;
}

}  // namespace lj::test
