// train/gpu_train.h on the CUDA executor.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>

#include "backends/cuda/adamw.cuh"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_check.h"
#include "models/llama.h"
#include "runtime/cuda/cuda_executor.h"
#include "train/gpu_train.h"

namespace lj {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

StatusOr<DeviceTensor> upload(cuda::Context& ctx, const Tensor& t) {
  return device_from_host(ctx, t.dtype(), t.dims(), t.raw());
}

}  // namespace

StatusOr<GpuRunResult> run_on_gpu(const GpuRunConfig& cfg) {
  LJ_CHECK(cfg.batch_fn != nullptr) << "GpuRunConfig::batch_fn is not set";
  const double t0 = now_s();
  LJ_ASSIGN_OR_RETURN(std::unique_ptr<cuda::Context> ctx, cuda::Context::create(0));
  GpuRunResult r;
  r.device_name = ctx->props().name;
  r.arch = ctx->props().arch();
  r.device_memory_bytes = ctx->props().memory_bytes;

  Graph g;
  // The GPU step casts each weight at its point of use: it keeps no 16-bit copies (yet).
  GraphOptions graph_options = cfg.graph;
  graph_options.low_weight_copies = false;
  LJ_ASSIGN_OR_RETURN(const LlamaGraph ids, build_train_graph(cfg.model, graph_options, &g));
  Device host(0);
  const std::vector<ParamSpec> specs = llama_param_specs(cfg.model);
  std::vector<DeviceTensor> params, m, v;
  {
    // One parameter at a time on the host, so host memory holds one tensor, not the model.
    for (size_t i = 0; i < specs.size(); ++i) {
      std::vector<Tensor> one =
          init_llama_params(host, {specs[i]}, cfg.model.initializer_range, cfg.seed + i);
      LJ_ASSIGN_OR_RETURN(DeviceTensor p, upload(*ctx, one[0]));
      LJ_ASSIGN_OR_RETURN(DeviceTensor mi, device_empty(*ctx, DType::f32, p.dims));
      LJ_ASSIGN_OR_RETURN(DeviceTensor vi, device_empty(*ctx, DType::f32, p.dims));
      LJ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(mi.data(), 0, mi.bytes(), ctx->stream().get()));
      LJ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(vi.data(), 0, vi.bytes(), ctx->stream().get()));
      params.push_back(std::move(p));
      m.push_back(std::move(mi));
      v.push_back(std::move(vi));
    }
  }
  Tensor cos, sin;
  LJ_RETURN_IF_ERROR(make_rope_inputs(host, cfg.model, cfg.seq_len, &cos, &sin));
  LJ_ASSIGN_OR_RETURN(DeviceTensor dcos, upload(*ctx, cos));
  LJ_ASSIGN_OR_RETURN(DeviceTensor dsin, upload(*ctx, sin));

  // Compiled runs place values by the static memory plan, as on the CPU.
  CudaExecutor ex(g, *ctx, /*planned=*/cfg.graph.compile);
  codegen::CudaKernelCache cache(r.arch);
  LJ_RETURN_IF_ERROR(ex.prepare(cache));
  r.fused_kernels = cache.stats().compiled + cache.stats().loaded + cache.stats().reused;
  LJ_RETURN_IF_ERROR(ctx->synchronize());
  r.setup_seconds = now_s() - t0;

  // Graph outputs: loss, [logits], then grad:<name> in llama_param_specs order.
  const size_t first_grad = cfg.graph.output_logits ? 2 : 1;
  LJ_CHECK_EQ(g.outputs().size(), first_grad + params.size());
  LJ_CHECK(ids.params.size() == params.size());
  int64_t step = 0;
  for (int64_t s = 0; s < cfg.steps; ++s) {
    const TrainStep::Batch b = cfg.batch_fn(host, s);
    const double ts = now_s();
    LJ_ASSIGN_OR_RETURN(DeviceTensor tok, upload(*ctx, b.tokens));
    LJ_ASSIGN_OR_RETURN(DeviceTensor tgt, upload(*ctx, b.targets));
    std::vector<DeviceTensor> in{tok, tgt, dcos, dsin};
    in.insert(in.end(), params.begin(), params.end());
    LJ_ASSIGN_OR_RETURN(std::vector<DeviceTensor> out, ex.run(in));
    // AdamW (torch's constants for this step; train/adamw.cc's begin_step).
    ++step;
    const double b1 = cfg.adamw.beta1, b2 = cfg.adamw.beta2, lr = cfg.adamw.lr;
    cuda::AdamWConstants c;
    c.step_size =
        static_cast<float>(lr) / static_cast<float>(1.0 - std::pow(b1, static_cast<double>(step)));
    c.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, static_cast<double>(step))));
    c.decay = static_cast<float>(1.0 - lr * cfg.adamw.weight_decay);
    c.beta1 = static_cast<float>(b1);
    c.beta2 = static_cast<float>(b2);
    c.eps = static_cast<float>(cfg.adamw.eps);
    std::vector<cuda::AdamWTensor> ts_list;
    for (size_t i = 0; i < params.size(); ++i) {
      const DeviceTensor& gr = out[first_grad + i];
      LJ_CHECK(gr.dtype == DType::f32) << "gradients are f32 (master weights)";
      ts_list.push_back({static_cast<float*>(params[i].data()),
                         static_cast<const float*>(gr.data()), static_cast<float*>(m[i].data()),
                         static_cast<float*>(v[i].data()), numel_of(params[i].dims)});
    }
    LJ_RETURN_IF_ERROR(cuda::adamw_multi_tensor(c, ts_list, ctx->env()));
    float loss = 0;
    LJ_RETURN_IF_ERROR(ctx->synchronize());
    LJ_RETURN_IF_ERROR(device_to_host(out[0], &loss));
    r.step_seconds.push_back(now_s() - ts);
    r.losses.push_back(loss);
    r.kernels_per_step = ex.kernels_launched();
    if (!std::isfinite(loss)) {
      return internal_error("step " + std::to_string(s) + ": the loss is " + std::to_string(loss),
                            "a CUDA kernel disagrees with the CPU: run tools/gpu_check.sh's gpu "
                            "tests");
    }
  }
  const cuda::DeviceMemoryStats& ms = ctx->allocator().stats();
  r.bytes_reserved_peak = ms.bytes_reserved_peak + ex.arena_bytes_peak();
  r.bytes_in_use_peak = ms.bytes_in_use_peak + ex.arena_bytes_peak();
  int64_t free_b = 0, total_b = 0;
  ctx->source().memory_info(&free_b, &total_b);
  r.bytes_device_used = total_b - free_b;
  return r;
}

}  // namespace lj
