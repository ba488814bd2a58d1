// train/gpu_train.h on the CUDA executor.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

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

// Host tensor into *dst, reusing its device buffer when the shape and dtype are the same.
Status upload_into(cuda::Context& ctx, const Tensor& t, DeviceTensor* dst) {
  if (dst->storage == nullptr || dst->dtype != t.dtype() || dst->dims != t.dims()) {
    LJ_ASSIGN_OR_RETURN(*dst, upload(ctx, t));
    return ok_status();
  }
  LJ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->data(), t.raw(), dst->bytes(),
                                          cudaMemcpyHostToDevice, ctx.stream().get()));
  return ctx.synchronize();  // the host tensor may go before the copy would have run
}

// Token ids and targets (i32) within [0, vocab), targets also the ignore index -100.
Status check_token_ids(const Tensor& t, int64_t vocab, const char* what) {
  LJ_CHECK(t.dtype() == DType::i32) << what << " ids are i32";
  const auto* ids = static_cast<const int32_t*>(t.raw());
  for (int64_t i = 0; i < numel_of(t.dims()); ++i) {
    const int64_t id = ids[i];
    if ((id < 0 || id >= vocab) && id != -100) {
      return out_of_range(std::string(what) + " id " + std::to_string(id) + " at position " +
                              std::to_string(i) + " is outside [0, " + std::to_string(vocab) + ")",
                          "the token data holds ids past the model's vocab_size");
    }
  }
  return ok_status();
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

  // Compiled runs place values by the static memory plan, as on the CPU, and replay the step as
  // a CUDA graph from the third step on (LJ_CUDA_GRAPHS=0: launch kernel by kernel).
  CudaExecutor ex(g, *ctx, /*planned=*/cfg.graph.compile);
  const char* graphs_env = std::getenv("LJ_CUDA_GRAPHS");
  r.cuda_graphs = cfg.graph.compile && !(graphs_env != nullptr && std::string(graphs_env) == "0");
  ex.set_cuda_graphs(r.cuda_graphs);
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
  // Tokens and targets go to the same device buffers every step, so a captured graph's input
  // addresses stay valid; their ids are checked here, on the host (a captured step cannot).
  DeviceTensor tok, tgt;
  for (int64_t s = 0; s < cfg.steps; ++s) {
    const TrainStep::Batch b = cfg.batch_fn(host, s);
    const double ts = now_s();
    LJ_RETURN_IF_ERROR(check_token_ids(b.tokens, cfg.model.vocab_size, "token"));
    LJ_RETURN_IF_ERROR(check_token_ids(b.targets, cfg.model.vocab_size, "target"));
    LJ_RETURN_IF_ERROR(upload_into(*ctx, b.tokens, &tok));
    LJ_RETURN_IF_ERROR(upload_into(*ctx, b.targets, &tgt));
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
    r.graph_replays = ex.graph_replays();
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
