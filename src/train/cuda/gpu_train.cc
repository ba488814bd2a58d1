// train/gpu_train.h on the CUDA executor.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/cuda/adamw.cuh"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/grad_ops.cuh"
#include "core/units.h"
#include "dist/nccl_communicator.h"
#include "dist/zero.h"
#include "models/llama.h"
#include "passes/regions/regions.h"
#include "runtime/cuda/cuda_executor.h"
#include "train/flat_state.h"
#include "train/gpu_train.h"
#include "train/sharded_checkpoint.h"

namespace lj {
namespace {

// Host tensor into *dst, reusing its device buffer when the shape and dtype are the same.
Status upload_into(cuda::Context& ctx, const Tensor& t, DeviceTensor* dst) {
  if (dst->storage == nullptr || dst->dtype != t.dtype() || dst->dims != t.dims()) {
    LJ_ASSIGN_OR_RETURN(*dst, device_from_host(ctx, t.dtype(), t.dims(), t.raw()));
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

// f32 elements [offset, offset + numel(dims)) of `base`, sharing its ownership.
DeviceTensor view_of(const DeviceTensor& base, int64_t offset, std::vector<int64_t> dims) {
  return DeviceTensor{
      std::shared_ptr<void>(base.storage, static_cast<float*>(base.data()) + offset), DType::f32,
      std::move(dims)};
}

float* f32(const DeviceTensor& t, int64_t offset = 0) {
  return static_cast<float*>(t.data()) + offset;
}

// A synchronous copy ordered on the context's stream: the stream is non-blocking, so a plain
// cudaMemcpy (legacy stream) would not be ordered with its kernels (and a pageable upload may
// return before its DMA lands).
CopyBytes stream_copy(cuda::Context& ctx, cudaMemcpyKind kind) {
  return [&ctx, kind](void* dst, const void* src, size_t bytes) -> Status {
    LJ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, ctx.stream().get()));
    return ctx.synchronize();
  };
}

class GpuStep final : public GpuTrainStep {
 public:
  GpuStep(const LlamaConfig& model, const TrainStepConfig& config, Device& host, FlatLayout layout)
      : model_(model),
        config_(config),
        host_(host),
        layout_(std::move(layout)),
        adamw_(host, std::vector<int64_t>{}, config.adamw),
        scaler_(LossScaleConfig{}) {}

  Status init();

  const std::vector<ParamSpec>& param_specs() const override { return specs_; }
  std::string compile_log() const override {
    if (!config_.graph.compile) return "";
    return passes_.to_string() + find_regions(graph_).to_string() +
           "generated kernels: " + std::to_string(report_.fused_kernels) +
           " CUDA kernels (NVRTC)\n";
  }
  StatusOr<StepResult> step(const std::vector<MicroBatch>& micro, double lr) override;
  Status pull_state() override;
  std::vector<Tensor>& host_params() override { return host_params_; }
  std::vector<Tensor>& host_m() override { return host_m_; }
  std::vector<Tensor>& host_v() override { return host_v_; }
  Status push_state(bool changed) override;
  void set_optimizer_steps(int64_t steps) override { adamw_.set_steps(steps); }
  LossScaler& loss_scaler() override { return scaler_; }
  StatusOr<EvalResult> evaluate(const TokenFile& data, const EvalOptions& options) override;
  GpuReport report() const override;

 private:
  int world() const { return layout_.world_size(); }
  // Stage 1: AdamW's m and v are this rank's shard, and the parameters are gathered after it.
  bool sharded_states() const { return zero_shards(stage_, ZeroSharded::optimizer_states); }
  // The range of the flat vector this rank's AdamW updates: all of it, or its stage-1 shard
  // (without the padding).
  FlatRange updated_range() const {
    const int rank = control_ != nullptr ? control_->rank() : 0;
    return layout_.held(rank, stage_, ZeroSharded::optimizer_states);
  }
  // Gradient output `k` of micro-batch `index` of `count` into the flat gradient; on the last
  // micro-batch with several ranks, starts the reduction of every bucket it completes.
  Status take_grad(size_t k, const DeviceTensor& g, int index, int count);
  Status start_bucket(size_t b);
  Status all_gather_params();
  FlatState flat_state() const;
  // This rank's GPU (its local rank modulo the GPUs it sees) and its CUDA context.
  Status open_device();

  LlamaConfig model_;
  TrainStepConfig config_;
  Device& host_;
  FlatLayout layout_;
  int stage_ = 0;
  Communicator* control_ = nullptr;  // data_parallel.comm: losses, MPI bootstrap
  // The context first: members go in reverse order, and NCCL and the buffers need it.
  std::unique_ptr<cuda::Context> ctx_;
  std::unique_ptr<Communicator> nccl_;  // gradients and parameters on the device
  Graph graph_;
  PassReport passes_;
  std::vector<ParamSpec> specs_;
  std::unique_ptr<CudaExecutor> ex_;
  std::unique_ptr<codegen::CudaKernelCache> cache_;
  size_t first_grad_ = 1;
  // m_, v_: numel (stage 0) or shard_numel (stage 1); flat_g_: made when first needed.
  DeviceTensor flat_p_, flat_g_, m_, v_;
  std::vector<DeviceTensor> params_;  // views of flat_p_
  DeviceTensor tok_, tgt_, cos_, sin_, partials_, sum_sq_, gather_buf_;
  AdamW adamw_;  // no states: torch's constants for each step and the step count
  LossScaler scaler_;
  // Gradient buckets (several ranks): reduce_bucket_size elements of the flat vector each.
  GradBuckets buckets_;
  std::vector<size_t> pending_;  // per bucket: its parameters not yet in the flat gradient
  std::vector<CommHandle> handles_;
  double comm_start_ = 0;
  std::vector<Tensor> host_params_, host_m_, host_v_;
  GpuReport report_;
  // Evaluation: the forward graph (built on first use) and its sequence length's rope tables.
  Graph eval_graph_;
  std::unique_ptr<CudaExecutor> eval_ex_;
};

Status GpuStep::open_device() {
  const cuda::Probe probe = cuda::probe();
  if (probe.device_count() == 0) {
    return unimplemented(
        "--device cuda: no GPU here (" +
            (probe.error.empty() ? std::string("the CUDA runtime lists none") : probe.error) + ")",
        "run on a host with an NVIDIA GPU, or use --device cpu");
  }
  // One GPU per rank: the rank's place among this host's ranks.
  report_.device = control_ != nullptr ? control_->local_rank() % probe.device_count() : 0;
  LJ_ASSIGN_OR_RETURN(ctx_, cuda::Context::create(report_.device));
  report_.device_name = ctx_->props().name;
  report_.arch = ctx_->props().arch();
  report_.device_memory_bytes = ctx_->props().memory_bytes;
  return ok_status();
}

Status GpuStep::init() {
  const double t0 = now_seconds();
  control_ = config_.data_parallel.comm;
  stage_ = control_ != nullptr ? config_.data_parallel.zero.stage : 0;
  {
    // Every rank has its GPU, or every rank stops here (before NCCL's bootstrap, which would
    // wait for a rank that never joins).
    Status ready = open_device();
    if (control_ != nullptr) ready = agree_on_status(*control_, ready);
    LJ_RETURN_IF_ERROR(ready);
  }
  if (control_ != nullptr) {
    NcclOptions o;
    o.device = report_.device;
    o.compute_stream = ctx_->stream().get();
    LJ_ASSIGN_OR_RETURN(nccl_, make_nccl_communicator(*control_, o, config_.comm_options));
  }

  // The GPU step casts each weight at its point of use: it keeps no 16-bit copies.
  GraphOptions graph_options = config_.graph;
  graph_options.low_weight_copies = false;
  LJ_ASSIGN_OR_RETURN(const LlamaGraph ids,
                      build_train_graph(model_, graph_options, &graph_, &passes_));
  specs_ = llama_param_specs(model_);
  LJ_CHECK(ids.params.size() == specs_.size());
  first_grad_ = config_.graph.output_logits ? 2 : 1;
  LJ_CHECK_EQ(graph_.outputs().size(), first_grad_ + specs_.size());
  LJ_CHECK_EQ(graph_.inputs().size(), 4 + specs_.size()) << "tokens, targets, rope, parameters";

  // Parameters (one at a time on the host, as the CPU initialises them) into the flat buffer.
  const int64_t padded = layout_.numel_padded();
  LJ_ASSIGN_OR_RETURN(flat_p_, device_empty(*ctx_, DType::f32, {padded}));
  const cudaStream_t stream = ctx_->stream().get();
  LJ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flat_p_.data(), 0, flat_p_.bytes(), stream));
  LJ_RETURN_IF_ERROR(ctx_->synchronize());
  for (size_t i = 0; i < specs_.size(); ++i) {
    params_.push_back(view_of(flat_p_, layout_.param_begin(i), specs_[i].dims));
    const std::vector<Tensor> one =
        init_llama_params(host_, {specs_[i]}, model_.initializer_range, config_.seed + i);
    LJ_RETURN_IF_ERROR(stream_copy(*ctx_, cudaMemcpyHostToDevice)(params_[i].data(), one[0].raw(),
                                                                  one[0].bytes()));
  }
  const int64_t states = flat_state_numel(layout_, stage_);
  LJ_ASSIGN_OR_RETURN(m_, device_empty(*ctx_, DType::f32, {states}));
  LJ_ASSIGN_OR_RETURN(v_, device_empty(*ctx_, DType::f32, {states}));
  LJ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m_.data(), 0, m_.bytes(), stream));
  LJ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(v_.data(), 0, v_.bytes(), stream));
  LJ_ASSIGN_OR_RETURN(
      partials_,
      device_empty(*ctx_, DType::f64, {static_cast<int64_t>(specs_.size()) * cuda::kSquareBlocks}));
  LJ_ASSIGN_OR_RETURN(sum_sq_, device_empty(*ctx_, DType::f64, {1}));

  if (nccl_ != nullptr) {
    const ZeroConfig& z = config_.data_parallel.zero;
    buckets_ = grad_buckets(layout_, z.reduce_bucket_size);
    if (sharded_states()) {
      const int64_t c = all_gather_send_numel(layout_, z.allgather_bucket_size);
      LJ_ASSIGN_OR_RETURN(gather_buf_, device_empty(*ctx_, DType::f32, {c * world()}));
    }
  }

  // Compiled runs place values by the static memory plan, as on the CPU, and replay the step as
  // a CUDA graph from the third run on (LJ_CUDA_GRAPHS=0: launch kernel by kernel).
  ex_ = std::make_unique<CudaExecutor>(graph_, *ctx_, /*planned=*/config_.graph.compile);
  const char* graphs_env = std::getenv("LJ_CUDA_GRAPHS");
  // Not with NCCL overlapping backward: those steps hand each gradient out as it is made.
  const bool overlapped = nccl_ != nullptr && config_.data_parallel.zero.overlap_comm;
  report_.cuda_graphs = config_.graph.compile && !overlapped &&
                        !(graphs_env != nullptr && std::string(graphs_env) == "0");
  ex_->set_cuda_graphs(report_.cuda_graphs);
  cache_ = std::make_unique<codegen::CudaKernelCache>(report_.arch);
  LJ_RETURN_IF_ERROR(ex_->prepare(*cache_));
  report_.fused_kernels =
      cache_->stats().compiled + cache_->stats().loaded + cache_->stats().reused;
  LJ_RETURN_IF_ERROR(ctx_->synchronize());
  report_.setup_seconds = now_seconds() - t0;
  return ok_status();
}

Status GpuStep::start_bucket(size_t b) {
  if (handles_.empty()) comm_start_ = now_seconds();
  const FlatRange r = buckets_.buckets[b];
  const auto n = static_cast<size_t>(r.size());
  // In place; NCCL's stream first waits for what the compute stream queued (the copies above).
  handles_.push_back(nccl_->iall_reduce_sum(std::span<const float>(f32(flat_g_, r.begin), n),
                                            std::span<float>(f32(flat_g_, r.begin), n)));
  return ok_status();
}

Status GpuStep::take_grad(size_t k, const DeviceTensor& g, int index, int count) {
  if (k < first_grad_) return ok_status();
  const size_t i = k - first_grad_;
  LJ_CHECK(g.dtype == DType::f32) << "gradients are f32 (master weights)";
  float* dst = f32(flat_g_, layout_.param_begin(i));
  const int64_t n = numel_of(g.dims);
  if (index == 0) {
    LJ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, g.data(), static_cast<size_t>(n) * 4,
                                            cudaMemcpyDeviceToDevice, ctx_->stream().get()));
  } else {
    LJ_RETURN_IF_ERROR(
        cuda::accumulate_f32(dst, static_cast<const float*>(g.data()), n, ctx_->env()));
  }
  if (nccl_ == nullptr || index != count - 1) return ok_status();
  for (size_t b : buckets_.of_param[i]) {
    if (--pending_[b] == 0) LJ_RETURN_IF_ERROR(start_bucket(b));
  }
  return ok_status();
}

StatusOr<StepResult> GpuStep::step(const std::vector<MicroBatch>& micro, double lr) {
  LJ_CHECK(!micro.empty());
  StepResult r;
  const int count = static_cast<int>(micro.size());
  handles_.clear();
  pending_ = buckets_.waits();
  const bool overlap = nccl_ != nullptr && config_.data_parallel.zero.overlap_comm;
  // One process, one micro-batch: the optimizer reads backward's gradients where they are.
  // Otherwise they go into the flat gradient (made on first use: 4 bytes a parameter) to be
  // accumulated and reduced there.
  const bool direct = nccl_ == nullptr && count == 1;
  if (!direct && flat_g_.storage == nullptr) {
    LJ_ASSIGN_OR_RETURN(flat_g_, device_empty(*ctx_, DType::f32, {layout_.numel_padded()}));
    LJ_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(flat_g_.data(), 0, flat_g_.bytes(), ctx_->stream().get()));
  }
  std::vector<cuda::GradSpan> grads(specs_.size());
  for (size_t i = 0; i < specs_.size() && !direct; ++i)
    grads[i] = {f32(flat_g_, layout_.param_begin(i)), numel_of(specs_[i].dims)};
  std::vector<DeviceTensor> in, held;  // held: the direct gradients' owner
  for (int j = 0; j < count; ++j) {
    const MicroBatch& mb = micro[static_cast<size_t>(j)];
    LJ_RETURN_IF_ERROR(check_token_ids(mb.tokens, model_.vocab_size, "token"));
    LJ_RETURN_IF_ERROR(check_token_ids(mb.targets, model_.vocab_size, "target"));
    // The same device buffers every step, so a captured graph's input addresses stay valid.
    LJ_RETURN_IF_ERROR(upload_into(*ctx_, mb.tokens, &tok_));
    LJ_RETURN_IF_ERROR(upload_into(*ctx_, mb.targets, &tgt_));
    if (cos_.storage == nullptr || cos_.dims[0] != mb.tokens.dims().back()) {
      Tensor cos, sin;
      LJ_RETURN_IF_ERROR(make_rope_inputs(host_, model_, mb.tokens.dims().back(), &cos, &sin));
      LJ_ASSIGN_OR_RETURN(cos_, device_from_host(*ctx_, DType::f32, cos.dims(), cos.raw()));
      LJ_ASSIGN_OR_RETURN(sin_, device_from_host(*ctx_, DType::f32, sin.dims(), sin.raw()));
    }
    in = {tok_, tgt_, cos_, sin_};
    in.insert(in.end(), params_.begin(), params_.end());
    // Overlap: the last micro-batch's gradients are taken (and their buckets reduced) as
    // backward makes them.
    const bool hooked = overlap && j == count - 1;
    if (hooked) {
      ex_->set_output_ready(
          [this, j, count](size_t k, const DeviceTensor& g) { return take_grad(k, g, j, count); });
    }
    StatusOr<std::vector<DeviceTensor>> ran = ex_->run(in);
    if (hooked) ex_->set_output_ready({});
    LJ_RETURN_IF_ERROR(ran.status());
    const std::vector<DeviceTensor>& out = *ran;
    if (direct) {
      for (size_t i = 0; i < specs_.size(); ++i) {
        const DeviceTensor& g = out[first_grad_ + i];
        LJ_CHECK(g.dtype == DType::f32) << "gradients are f32 (master weights)";
        grads[i] = {static_cast<const float*>(g.data()), numel_of(g.dims)};
      }
      held = out;
    } else if (!hooked) {
      for (size_t k = first_grad_; k < out.size(); ++k)
        LJ_RETURN_IF_ERROR(take_grad(k, out[k], j, count));
    }
    float loss = 0;
    LJ_RETURN_IF_ERROR(ctx_->synchronize());  // also: the arena's gradients are copied
    LJ_RETURN_IF_ERROR(device_to_host(out[0], &loss));
    r.loss += static_cast<double>(loss) / count;
  }
  report_.kernels_per_step = ex_->kernels_launched();
  report_.graph_replays = ex_->graph_replays();
  if (nccl_ != nullptr) {
    LJ_CHECK_EQ(handles_.size(), buckets_.buckets.size()) << "every gradient bucket was started";
    const double t_wait = now_seconds();
    for (CommHandle& h : handles_) LJ_RETURN_IF_ERROR(h.wait());
    r.comm_seconds = now_seconds() - comm_start_;
    r.comm_exposed_seconds = now_seconds() - t_wait;
    LJ_ASSIGN_OR_RETURN(const double sum, control_->all_reduce_sum(r.loss));
    r.loss = sum / world();
  }
  const double t_opt = now_seconds();
  const double scale = 1.0 / (static_cast<double>(count) * world());
  if (scale != 1.0) {
    LJ_RETURN_IF_ERROR(
        cuda::scale_f32(f32(flat_g_), static_cast<float>(scale), layout_.numel(), ctx_->env()));
  }
  // Cut by parameter on every path, so the direct and the flat gradient give the same bits.
  LJ_RETURN_IF_ERROR(cuda::sum_squares_f32(grads, static_cast<double*>(partials_.data()),
                                           static_cast<double*>(sum_sq_.data()), ctx_->env()));
  LJ_RETURN_IF_ERROR(ctx_->synchronize());
  double sum_sq = 0;
  LJ_RETURN_IF_ERROR(device_to_host(sum_sq_, &sum_sq));
  r.grad_norm = std::sqrt(sum_sq);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    r.updated = false;
    r.optimizer_seconds = now_seconds() - t_opt;
    return r;
  }
  // torch.nn.utils.clip_grad_norm_'s factor, folded into the update as on the CPU.
  const bool clip = config_.grad_clip > 0 && r.grad_norm > config_.grad_clip;
  const AdamWStepConstants hc = adamw_.begin_step(lr);
  cuda::AdamWConstants c;
  c.step_size = hc.step_size;
  c.decay = hc.decay;
  c.beta1 = hc.beta1;
  c.beta2 = hc.beta2;
  c.eps = hc.eps;
  c.bc2_sqrt = hc.bc2_sqrt;
  c.grad_scale = clip ? static_cast<float>(config_.grad_clip / (r.grad_norm + 1e-6)) : 1.0f;
  // Stage 0: every parameter (its m and v at its flat offset); stage 1: this rank's range of the
  // flat vector. The update is elementwise: how it is cut changes no bit.
  std::vector<cuda::AdamWTensor> update;
  if (!sharded_states()) {
    for (size_t i = 0; i < specs_.size(); ++i) {
      const int64_t b = layout_.param_begin(i);
      update.push_back({f32(params_[i]), grads[i].x, f32(m_, b), f32(v_, b), grads[i].n});
    }
  } else {
    const FlatRange u = updated_range();
    update.push_back({f32(flat_p_, u.begin), f32(flat_g_, u.begin), f32(m_), f32(v_), u.size()});
  }
  LJ_RETURN_IF_ERROR(cuda::adamw_multi_tensor(c, update, ctx_->env()));
  if (sharded_states()) LJ_RETURN_IF_ERROR(all_gather_params());
  LJ_RETURN_IF_ERROR(ctx_->synchronize());
  r.optimizer_seconds = now_seconds() - t_opt;
  return r;
}

// Stage 1: every rank's updated shard to every rank, in buckets of allgather_bucket_size
// elements in total: chunk [off, off + n) of each shard is gathered into gather_buf_ (rank
// blocks one after another), then copied to its place in each shard of the flat parameters.
Status GpuStep::all_gather_params() {
  const int64_t S = layout_.shard_numel();
  const int64_t c = gather_buf_.dims[0] / world();
  const int64_t mine = layout_.shard(control_->rank()).begin;
  for (int64_t off = 0; off < S; off += c) {
    const int64_t n = std::min(c, S - off);
    CommHandle h =
        nccl_->iall_gather(std::span<const float>(f32(flat_p_, mine + off), static_cast<size_t>(n)),
                           std::span<float>(f32(gather_buf_), static_cast<size_t>(n * world())));
    LJ_RETURN_IF_ERROR(h.wait());
    LJ_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        f32(flat_p_, off), static_cast<size_t>(S) * 4, f32(gather_buf_), static_cast<size_t>(n) * 4,
        static_cast<size_t>(n) * 4, static_cast<size_t>(world()), cudaMemcpyDeviceToDevice,
        ctx_->stream().get()));
  }
  return ok_status();
}

FlatState GpuStep::flat_state() const {
  return FlatState{f32(flat_p_), f32(m_), f32(v_)};
}

Status GpuStep::pull_state() {
  LJ_RETURN_IF_ERROR(ctx_->synchronize());
  return flat_state_to_host(layout_, stage_, specs_, flat_state(),
                            stream_copy(*ctx_, cudaMemcpyDeviceToHost), host_, &host_params_,
                            &host_m_, &host_v_);
}

Status GpuStep::push_state(bool changed) {
  if (changed) {
    LJ_RETURN_IF_ERROR(ctx_->synchronize());
    LJ_RETURN_IF_ERROR(host_to_flat_state(layout_, stage_, specs_, host_params_, host_m_, host_v_,
                                          stream_copy(*ctx_, cudaMemcpyHostToDevice),
                                          flat_state()));
  }
  // The host copies are not kept between checkpoints (12 bytes a parameter).
  host_params_.clear();
  host_m_.clear();
  host_v_.clear();
  return ok_status();
}

StatusOr<EvalResult> GpuStep::evaluate(const TokenFile& data, const EvalOptions& o) {
  if (eval_ex_ == nullptr) {
    // The forward graph in the run's precision (train/eval.cc's, on the device).
    LJ_RETURN_IF_ERROR(build_eval_graph(model_, o.autocast, /*output_logits=*/false, &eval_graph_));
    eval_ex_ = std::make_unique<CudaExecutor>(eval_graph_, *ctx_);
  }
  DeviceTensor tok, tgt, cos, sin;
  {
    Tensor hc, hs;
    LJ_RETURN_IF_ERROR(make_rope_inputs(host_, model_, o.seq_len, &hc, &hs));
    LJ_ASSIGN_OR_RETURN(cos, device_from_host(*ctx_, DType::f32, hc.dims(), hc.raw()));
    LJ_ASSIGN_OR_RETURN(sin, device_from_host(*ctx_, DType::f32, hs.dims(), hs.raw()));
  }
  return evaluate_batches(
      data, model_.vocab_size, o, host_,
      [&](const Tensor& tokens, const Tensor& targets, Tensor* logits) -> StatusOr<double> {
        LJ_RETURN_IF_ERROR(upload_into(*ctx_, tokens, &tok));
        LJ_RETURN_IF_ERROR(upload_into(*ctx_, targets, &tgt));
        std::vector<DeviceTensor> in{tok, tgt, cos, sin};
        in.insert(in.end(), params_.begin(), params_.end());
        LJ_ASSIGN_OR_RETURN(std::vector<DeviceTensor> out, eval_ex_->run(in));
        LJ_RETURN_IF_ERROR(ctx_->synchronize());
        float loss = 0;
        LJ_RETURN_IF_ERROR(device_to_host(out[0], &loss));
        if (logits != nullptr) {
          return unimplemented("evaluation on the GPU hands back no logits",
                               "evaluate on the CPU (--device cpu) for them");
        }
        return static_cast<double>(loss);
      });
}

GpuReport GpuStep::report() const {
  GpuReport r = report_;
  const cuda::DeviceMemoryStats& ms = ctx_->allocator().stats();
  r.bytes_reserved_peak = ms.bytes_reserved_peak + ex_->arena_bytes_peak();
  r.bytes_in_use_peak = ms.bytes_in_use_peak + ex_->arena_bytes_peak();
  int64_t free_b = 0, total_b = 0;
  ctx_->source().memory_info(&free_b, &total_b);
  r.bytes_device_used = total_b - free_b;
  return r;
}

}  // namespace

StatusOr<std::unique_ptr<GpuTrainStep>> create_gpu_train_step(const LlamaConfig& model,
                                                              const TrainStepConfig& config,
                                                              Device& host) {
  LJ_RETURN_IF_ERROR(check_gpu_step_config(config));
  const Communicator* comm = config.data_parallel.comm;
  if (comm != nullptr) LJ_RETURN_IF_ERROR(config.data_parallel.zero.validate());
  auto s = std::make_unique<GpuStep>(
      model, config, host,
      flat_layout_of(llama_param_specs(model), comm != nullptr ? comm->world_size() : 1));
  LJ_RETURN_IF_ERROR(s->init());
  return std::unique_ptr<GpuTrainStep>(std::move(s));
}

}  // namespace lj
