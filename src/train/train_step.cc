#include "train/train_step.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/random.h"
#include "core/units.h"
#include "models/moe.h"
#include "passes/master_weights/master_weights.h"
#include "passes/regions/regions.h"
#include "train/hf_model.h"

namespace lj {
namespace {

// acc[i] += g[i], elementwise, for each pair.
void add_grads(std::vector<Tensor>& acc, const std::vector<Tensor>& g, int threads) {
  LJ_CHECK_EQ(acc.size(), g.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    float* a = acc[i].data<float>();
    const float* b = g[i].data<float>();
    const int64_t n = acc[i].numel();
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) a[k] += b[k];
  }
}

}  // namespace

Tensor init_llama_param(Device& dev, const std::vector<ParamSpec>& specs, size_t i, double std,
                        uint64_t seed) {
  Tensor t = Tensor::empty(dev, DType::f32, specs[i].dims, MemCategory::weights);
  float* p = t.data<float>();
  const int64_t n = t.numel();
  const uint64_t stream = seed + i;
  const int64_t at = specs[i].expert_offset;  // a rank's experts: the whole tensor's slice
#pragma omp parallel for schedule(static) num_threads(dev.threads()) if (n > 65536)
  for (int64_t k = 0; k < n; ++k) {
    p[k] = specs[i].is_norm ? 1.0f
           : specs[i].is_bias
               ? 0.0f
               : static_cast<float>(std * random_normal01(stream, static_cast<uint64_t>(at + k)));
  }
  return t;
}

std::vector<Tensor> init_llama_params(Device& dev, const std::vector<ParamSpec>& specs, double std,
                                      uint64_t seed) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < specs.size(); ++i)
    params.push_back(init_llama_param(dev, specs, i, std, seed));
  return params;
}

Tensor init_llama_shard(Device& dev, const std::vector<ParamSpec>& specs, double std, uint64_t seed,
                        const FlatLayout& layout, int rank, const std::vector<size_t>& in_specs) {
  const FlatRange mine = layout.shard(rank);
  Tensor t = Tensor::zeros(dev, DType::f32, {layout.shard_numel()}, MemCategory::weights);
  float* out = t.data<float>();
  for (const FlatPiece& fp : layout.pieces(mine)) {
    FlatPiece p = fp;
    if (!in_specs.empty()) p.param = in_specs[fp.param];  // the layout's parameter in `specs`
    float* dst = out + (p.flat_offset - mine.begin);
    const uint64_t stream = seed + p.param;
    const bool norm = specs[p.param].is_norm, bias = specs[p.param].is_bias;
    for (int64_t k = 0; k < p.count; ++k) {
      dst[k] = norm   ? 1.0f
               : bias ? 0.0f
                      : static_cast<float>(
                            std * random_normal01(
                                      stream, static_cast<uint64_t>(specs[p.param].expert_offset +
                                                                    p.param_offset + k)));
    }
  }
  return t;
}

StatusOr<std::unique_ptr<TrainStep>> TrainStep::create(const LlamaConfig& model,
                                                       TrainStepConfig config, Device& dev) {
  if (config.data_parallel.comm != nullptr) {
    LJ_RETURN_IF_ERROR(config.data_parallel.zero.validate());  // before the graph's collectives
  }
  TrainGraph built;
  built.options = config.graph;
  built.options.grad_sync = grad_sync_options(config.data_parallel);
  built.options.experts = expert_shard(config.data_parallel);
  LJ_ASSIGN_OR_RETURN(built.ids,
                      build_train_graph(model, built.options, &built.graph, &built.passes));
  return create(model, std::move(config), dev, std::move(built));
}

StatusOr<std::unique_ptr<TrainStep>> TrainStep::create(const LlamaConfig& model,
                                                       TrainStepConfig config, Device& dev,
                                                       TrainGraph built) {
  LJ_CHECK(built.options.compile == config.graph.compile &&
           built.options.output_logits == config.graph.output_logits &&
           built.options.recompute == config.graph.recompute &&
           built.options.dtype == config.graph.dtype &&
           built.options.autocast == config.graph.autocast &&
           built.options.loss_scaling == config.graph.loss_scaling &&
           built.options.grad_sync == grad_sync_options(config.data_parallel) &&
           built.options.experts == expert_shard(config.data_parallel))
      << "TrainStep::create: the joint graph was built with other GraphOptions than the step's";
  if (config.loss_scale.enabled != config.graph.loss_scaling) {
    return invalid_argument("loss scaling needs the joint graph's loss_scale input",
                            "set GraphOptions::loss_scaling with LossScaleConfig::enabled");
  }
  if (config.loss_scale.enabled) LJ_RETURN_IF_ERROR(config.loss_scale.validate());
  std::unique_ptr<TrainStep> s(new TrainStep(dev));
  s->model_ = model;
  s->config_ = config;
  s->graph_ = std::move(built.graph);
  s->ids_ = std::move(built.ids);
  s->passes_ = std::move(built.passes);
  s->specs_ = llama_param_specs(model, built.options.experts);
  s->whole_specs_ = llama_param_specs(model);
  const bool ep = shards_experts(config.data_parallel);
  s->split_ = ParamSplit::of(s->specs_);  // all dense unless the experts are sharded
  s->scaler_ = LossScaler(config.loss_scale);
  if (config.graph.loss_scaling) {
    s->loss_scale_ = Tensor::empty(dev, DType::f32, {}, MemCategory::workspace);
  }
  for (const NamedValue& o : s->graph_.outputs()) {
    if (o.name.rfind("grad:", 0) != 0) continue;
    ++s->num_grad_outputs_;
    s->grad_is_expert_.push_back(ep && is_expert_param(o.name.substr(5)));
  }
  const bool zero3 = config.data_parallel.comm != nullptr &&
                     config.data_parallel.zero.shards(ZeroSharded::parameters);
  if (!zero3) {
    s->params_ = init_llama_params(dev, s->specs_, model.initializer_range, config.seed);
    s->expert_params_ = ParamSplit::pick(s->params_, s->split_.experts);
  } else {
    // The experts' weights stay whole on the rank (its E / N experts); the rest is sharded.
    for (size_t i : s->split_.experts) {
      s->expert_params_.push_back(
          init_llama_param(dev, s->specs_, i, model.initializer_range, config.seed));
    }
  }
  // The 16-bit weight copies the graph reads (passes/master_weights), after the f32 inputs.
  for (ValueId in : s->graph_.inputs()) {
    const std::string param = low_weight_param_name(s->graph_.input_name(in));
    if (param.empty()) continue;
    LJ_CHECK(!zero3) << "16-bit weight copies at ZeRO stage 3";
    const auto it = std::find_if(s->specs_.begin(), s->specs_.end(),
                                 [&](const ParamSpec& p) { return p.name == param; });
    LJ_CHECK(it != s->specs_.end()) << "graph input for an unknown parameter " << param;
    const auto i = static_cast<size_t>(it - s->specs_.begin());
    if (s->low_params_.empty()) s->low_params_.resize(s->specs_.size());
    s->low_params_[i] =
        Tensor::empty(dev, s->graph_.type(in).dtype, it->dims, MemCategory::weights);
    s->low_inputs_.push_back(i);
  }
  s->executor_ = std::make_unique<Executor>(
      s->graph_, dev,
      ExecutorOptions{.profile = config.profile,
                      .profile_cpu = config.profile_cpu,
                      .planned = config.graph.compile && config.static_memory_plan});
  if (config.graph.compile) {
    s->kernel_cache_ =
        config.kernel_cache ? config.kernel_cache : std::make_shared<codegen::KernelCache>();
    LJ_ASSIGN_OR_RETURN(s->kernel_report_,
                        compile_kernels(s->graph_, *s->kernel_cache_, *s->executor_));
  }
  if (config.data_parallel.comm != nullptr) {
    // The world's ZeRO: every parameter, or under expert parallelism the dense ones
    // (train/expert_params.h keeps the experts').
    if (zero3) {
      std::vector<int64_t> numels;
      for (size_t i : s->split_.dense) numels.push_back(numel_of(s->specs_[i].dims));
      FlatLayout layout(std::move(numels), config.data_parallel.comm->world_size());
      Tensor shard = init_llama_shard(dev, s->specs_, model.initializer_range, config.seed, layout,
                                      config.data_parallel.comm->rank(), s->split_.dense);
      LJ_ASSIGN_OR_RETURN(
          s->zero_, ZeroOptimizer::create_sharded(dev, config.data_parallel, std::move(layout),
                                                  std::move(shard), config.adamw));
    } else {
      LJ_ASSIGN_OR_RETURN(
          s->zero_,
          ZeroOptimizer::create(dev, config.data_parallel,
                                ParamSplit::pick(s->params_, s->split_.dense), config.adamw));
    }
    if (ep) {
      LJ_ASSIGN_OR_RETURN(
          s->experts_, ExpertParams::create(dev, config.data_parallel, s->specs_, s->whole_specs_,
                                            s->expert_params_, config.adamw));
    }
    s->grad_sync_ = std::make_unique<GradSync>(s->graph_, *s->executor_, *config.data_parallel.comm,
                                               s->zero_->layout());
    s->sharded_params_ = zero3;  // the shard (zero_->param_shard()) is the only copy
    if (config.data_parallel.experts != nullptr) {
      s->expert_sync_ =
          std::make_unique<ExpertSync>(s->graph_, *s->executor_, *config.data_parallel.experts);
    }
  } else {
    s->adamw_ = std::make_unique<AdamW>(dev, s->params_, config.adamw);
  }
  return s;
}

Status TrainStep::share_state_with(TrainStep& owner) {
  if (zero_ || owner.zero_ || !adamw_ || !owner.adamw_) {
    return unimplemented("sharing parameters between data-parallel steps",
                         "share_state_with is for one process without ZeRO");
  }
  const auto same_dims = [](const ParamSpec& a, const ParamSpec& b) { return a.dims == b.dims; };
  if (!std::equal(specs_.begin(), specs_.end(), owner.specs_.begin(), owner.specs_.end(),
                  same_dims) ||
      low_inputs_ != owner.low_inputs_) {
    return invalid_argument("share_state_with: the steps train different models or precisions",
                            "build both steps from the same model and precision");
  }
  params_ = owner.params_;
  low_params_ = owner.low_params_;
  low_fresh_ = false;  // cast again before this step's first forward
  adamw_->m() = owner.adamw_->m();
  adamw_->v() = owner.adamw_->v();
  adamw_->set_steps(owner.adamw_->steps());
  return ok_status();
}

Status TrainStep::gather_params() {
  if (!sharded_params_ || !params_.empty()) return ok_status();
  Communicator& comm = *config_.data_parallel.comm;
  const FlatLayout& layout = zero_->layout();
  const FlatRange mine = layout.shard(comm.rank());
  const float* shard = zero_->param_shard().data<float>();
  size_t dense = 0, expert = 0;  // the next of each kind
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].is_expert && experts_) {
      params_.push_back(expert_params_[expert++]);  // held whole
      continue;
    }
    Tensor t = Tensor::empty(dev_, DType::f32, specs_[i].dims, MemCategory::weights);
    const int64_t fb = layout.param_begin(dense++), fe = fb + t.numel();
    std::vector<int64_t> counts;
    for (int r = 0; r < comm.world_size(); ++r) {
      const FlatRange s = layout.shard(r);
      counts.push_back(std::max<int64_t>(0, std::min(fe, s.end) - std::max(fb, s.begin)));
    }
    const int64_t lo = std::max(fb, mine.begin) - mine.begin;
    LJ_RETURN_IF_ERROR(
        comm.iall_gather(
                std::span<const float>(
                    shard + lo, static_cast<size_t>(counts[static_cast<size_t>(comm.rank())])),
                counts, std::span<float>(t.data<float>(), static_cast<size_t>(t.numel())))
            .wait());
    params_.push_back(std::move(t));
  }
  return ok_status();
}

void TrainStep::scatter_params() {
  if (!sharded_params_ || params_.empty()) return;
  const FlatLayout& layout = zero_->layout();
  pack_flat(layout, ParamSplit::pick(params_, split_.dense),
            layout.shard(config_.data_parallel.comm->rank()), zero_->param_shard().data<float>());
  params_.clear();
}

Status TrainStep::pull_state() {
  LJ_RETURN_IF_ERROR(gather_params());
  if (!experts_) return ok_status();
  // The whole model's state, as a run without expert parallelism holds it.
  LJ_ASSIGN_OR_RETURN(whole_params_, experts_->whole_params(dev_, params_));
  LJ_ASSIGN_OR_RETURN(
      whole_m_, experts_->whole_moments(dev_, zero_->layout(), zero_->adamw().m(), /*v=*/false));
  LJ_ASSIGN_OR_RETURN(
      whole_v_, experts_->whole_moments(dev_, zero_->layout(), zero_->adamw().v(), /*v=*/true));
  return ok_status();
}

std::vector<Tensor>& TrainStep::host_params() {
  return experts_ ? whole_params_ : params();
}
std::vector<Tensor>& TrainStep::host_m() {
  return experts_ ? whole_m_ : optimizer().m();
}
std::vector<Tensor>& TrainStep::host_v() {
  return experts_ ? whole_v_ : optimizer().v();
}

void TrainStep::set_optimizer_steps(int64_t steps) {
  optimizer().set_steps(steps);
  if (experts_) experts_->adamw().set_steps(steps);
}

Status TrainStep::push_state(bool changed) {
  if (experts_ && !whole_params_.empty()) {
    if (changed) {
      // The rank's part of the whole state.
      experts_->set_local_params(whole_params_, params_);
      LJ_RETURN_IF_ERROR(
          experts_->set_moments(dev_, zero_->layout(), whole_m_, zero_->adamw().m(), /*v=*/false));
      LJ_RETURN_IF_ERROR(
          experts_->set_moments(dev_, zero_->layout(), whole_v_, zero_->adamw().v(), /*v=*/true));
      low_fresh_ = false;
    }
    whole_params_.clear();
    whole_m_.clear();
    whole_v_.clear();
  }
  // ZeRO-3: a changed state goes back into the shard; unchanged whole parameters are dropped.
  if (changed) {
    scatter_params();
  } else if (sharded_params_) {
    params_.clear();
  }
  return ok_status();
}

StatusOr<EvalResult> TrainStep::evaluate(const TokenFile& data, const EvalOptions& options) {
  LJ_RETURN_IF_ERROR(gather_params());  // ZeRO-3: evaluated whole, freed after
  // Expert parallelism: every rank evaluates the whole model, its experts gathered.
  std::vector<Tensor> whole = params_;
  if (experts_) {
    LJ_ASSIGN_OR_RETURN(whole, experts_->whole_params(dev_, params_));
  }
  const HfModel view{model_, whole_specs_, whole};
  auto r = lj::evaluate(view, data, options, dev_);
  LJ_RETURN_IF_ERROR(push_state(false));
  return r;
}

std::vector<Tensor> TrainStep::take_expert_grads(std::vector<Tensor>& grads) const {
  LJ_CHECK_EQ(grads.size(), grad_is_expert_.size());
  std::vector<Tensor> experts, dense;
  for (size_t k = 0; k < grads.size(); ++k)
    (grad_is_expert_[k] ? experts : dense).push_back(std::move(grads[k]));
  grads = std::move(dense);
  return experts;
}

StatusOr<ZeroStepResult> TrainStep::zero_step(std::vector<Tensor> grads,
                                              std::vector<Tensor> expert_grads, double local_loss,
                                              double lr, bool grads_reduced, double grad_unscale) {
  if (!experts_) {
    return zero_->step(params_, std::move(grads), local_loss, lr, config_.grad_clip, grads_reduced,
                       grad_unscale);
  }
  // Two groups (train/expert_params.h), one global norm.
  LJ_ASSIGN_OR_RETURN(const ZeroReduced dense,
                      zero_->reduce(std::move(grads), local_loss, grads_reduced, grad_unscale,
                                    /*reduce_loss=*/true));
  StatusOr<ZeroReduced> experts = experts_->reduce(std::move(expert_grads), grad_unscale);
  if (!experts.ok()) {
    zero_->discard();
    return experts.status();
  }
  ZeroStepResult r;
  r.loss = dense.loss;
  r.grad_norm = std::sqrt(dense.sum_squares + experts->sum_squares);
  r.comm_seconds = dense.comm_seconds + experts->comm_seconds;
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    zero_->discard();
    experts_->discard();
    r.updated = false;
    return r;
  }
  const double clip = clip_factor(r.grad_norm, config_.grad_clip);
  std::vector<Tensor> dense_params =
      sharded_params_ ? std::vector<Tensor>{} : ParamSplit::pick(params_, split_.dense);
  StatusOr<double> gathered = zero_->update(dense_params, lr, clip);
  if (!gathered.ok()) {
    experts_->discard();
    return gathered.status();
  }
  LJ_ASSIGN_OR_RETURN(const double expert_gathered, experts_->update(expert_params_, lr, clip));
  r.comm_seconds += *gathered + expert_gathered;
  return r;
}

ExpertShard expert_shard(const DataParallel& dp) {
  if (dp.comm == nullptr || dp.experts == nullptr) return {};
  return ExpertShard{.size = dp.experts->world_size(), .rank = dp.experts->rank()};
}

GradSyncOptions grad_sync_options(const DataParallel& dp) {
  if (dp.comm == nullptr) return {};
  return GradSyncOptions::of(dp.zero, dp.comm->world_size(), dp.comm->rank());
}

std::string TrainStep::compile_log() const {
  if (!config_.graph.compile) return "";
  return passes_.to_string() + find_regions(graph_).to_string() +
         "generated kernels: " + kernel_report_.to_string() + "\n";
}

Status make_rope_inputs(Device& dev, const LlamaConfig& c, int64_t seq_len, Tensor* cos,
                        Tensor* sin) {
  if (seq_len > c.max_position_embeddings) {
    return invalid_argument("sequence length " + std::to_string(seq_len) +
                                " is above the model's " + "max_position_embeddings " +
                                std::to_string(c.max_position_embeddings),
                            "use a shorter --seq-len");
  }
  std::vector<float> vc, vs;
  rope_tables(c, seq_len, &vc, &vs);
  const std::vector<int64_t> dims{seq_len, c.head_dim};
  *cos = Tensor::empty(dev, DType::f32, dims, MemCategory::workspace);
  *sin = Tensor::empty(dev, DType::f32, dims, MemCategory::workspace);
  std::copy(vc.begin(), vc.end(), cos->data<float>());
  std::copy(vs.begin(), vs.end(), sin->data<float>());
  return ok_status();
}

Status TrainStep::rope_for(int64_t seq_len) {
  if (rope_cos_.defined() && rope_cos_.dims()[0] == seq_len) return ok_status();
  return make_rope_inputs(dev_, model_, seq_len, &rope_cos_, &rope_sin_);
}

StatusOr<ForwardBackward> TrainStep::forward_backward(const Tensor& tokens, const Tensor& targets) {
  LJ_RETURN_IF_ERROR(rope_for(tokens.dims().back()));
  std::vector<Tensor> inputs{tokens, targets, rope_cos_, rope_sin_};
  if (loss_scale_.defined()) loss_scale_.data<float>()[0] = static_cast<float>(scaler_.scale());
  if (sharded_params_) {
    // The graph gathers the parameters (ZeRO-3); its shard input comes after the loss scale.
    // The experts' weights (expert parallelism) stay inputs, before it.
    inputs.insert(inputs.end(), expert_params_.begin(), expert_params_.end());
    if (loss_scale_.defined()) inputs.push_back(loss_scale_);
    inputs.push_back(zero_->param_shard());
  } else {
    inputs.insert(inputs.end(), params_.begin(), params_.end());
    if (loss_scale_.defined()) inputs.push_back(loss_scale_);
  }
  if (!low_inputs_.empty()) {
    if (!low_fresh_) write_low_copies(params_, low_params_, dev_.threads());
    low_fresh_ = true;
    for (size_t i : low_inputs_) inputs.push_back(low_params_[i]);
  }
  LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, executor_->run(inputs));
  // Outputs: loss, [logits], then one gradient per parameter (see create()).
  ForwardBackward r;
  r.loss = outs[0].at(0);
  size_t next = 1;
  if (config_.graph.output_logits) r.logits = outs[next++];
  r.grads.assign(outs.begin() + static_cast<std::ptrdiff_t>(next),
                 outs.begin() + static_cast<std::ptrdiff_t>(next + num_grad_outputs_));
  return r;
}

StatusOr<StepResult> TrainStep::step(const Tensor& tokens, const Tensor& targets, double lr) {
  return step(std::vector<Batch>{{tokens, targets}}, lr);
}

StatusOr<StepResult> TrainStep::step(const std::vector<Batch>& micro_batches, double lr) {
  LJ_CHECK(!micro_batches.empty());
  StepResult r;
  r.loss_scale = scaler_.scale();
  std::vector<Tensor> grads;
  std::vector<Tensor> expert_grads;  // expert parallelism: the experts', summed over micro-batches
  const double scale = 1.0 / static_cast<double>(micro_batches.size());
  const bool in_graph = grad_sync_ && grad_sync_->active();
  const int count = static_cast<int>(micro_batches.size());
  for (int i = 0; i < count; ++i) {
    const Batch& mb = micro_batches[static_cast<size_t>(i)];
    if (in_graph) {
      grad_sync_->begin_micro_batch(
          i, count, grads.empty() ? nullptr : &grads,
          [this](int64_t begin, int64_t n) { return zero_->grad_part(begin, n); });
    }
    LJ_ASSIGN_OR_RETURN(ForwardBackward fb, forward_backward(mb.tokens, mb.targets));
    r.loss += fb.loss * scale;
    if (experts_) {
      // The experts' gradients, out of the dense ones' way, accumulated as one process does.
      std::vector<Tensor> mine = take_expert_grads(fb.grads);
      if (i == 0) {
        expert_grads = std::move(mine);
        if (count > 1 && config_.graph.compile) {
          for (Tensor& g : expert_grads) g = g.clone(dev_, MemCategory::grads);
        }
      } else {
        add_grads(expert_grads, mine, dev_.threads());
      }
    }
    if (in_graph && (grad_sync_->shards_gradients() || i == count - 1)) {
      // Backward reduced them: the averaged gradients (stages 0, 1) or none (stage 2, in the
      // optimizer's shard).
      grads = std::move(fb.grads);
      continue;
    }
    if (grads.empty()) {
      grads = std::move(fb.grads);
      // Planned (compiled) mode returns views of the executor's arena: own the first
      // micro-batch's gradients so the next one reuses that arena instead of a second one.
      if (micro_batches.size() > 1 && config_.graph.compile) {
        for (Tensor& g : grads) g = g.clone(dev_, MemCategory::grads);
      }
      continue;
    }
    add_grads(grads, fb.grads, dev_.threads());
  }
  if (micro_batches.size() > 1 && !in_graph) scale_grads(grads, scale, dev_.threads());
  if (micro_batches.size() > 1) scale_grads(expert_grads, scale, dev_.threads());
  // The optimizer's time, on the profile's clock.
  const auto opt_clock = [&] {
    return config_.profile && config_.profile_cpu ? process_cpu_seconds() / dev_.threads()
                                                  : now_seconds();
  };
  const double t_opt = opt_clock();
  if (zero_) {
    // fp16 with several ranks, as DeepSpeed does it: the scaled gradients are reduced, then
    // unscaled (zero_->step); the overflow test is on the reduced loss and norm, so every rank
    // skips the same steps and its scaler moves identically.
    low_fresh_ = false;  // ZeRO updates the parameters itself: the copies are cast again
    LJ_ASSIGN_OR_RETURN(ZeroStepResult z, zero_step(std::move(grads), std::move(expert_grads),
                                                    r.loss, lr, in_graph, 1.0 / r.loss_scale));
    const GradSyncTimes t = in_graph ? grad_sync_->take_times() : GradSyncTimes{};
    StepResult zr{z.loss,
                  z.grad_norm,
                  z.updated,
                  z.comm_seconds + t.comm_seconds,
                  z.comm_seconds + t.exposed_seconds,
                  opt_clock() - t_opt,
                  r.loss_scale,
                  false};
    if (config_.loss_scale.enabled) {
      zr.overflow = !z.updated;
      LJ_RETURN_IF_ERROR(scaler_.update(zr.overflow));
    }
    return zr;
  }
  // fp16: the loss scale undone (a power of two: exact).
  if (r.loss_scale != 1.0) scale_grads(grads, 1.0 / r.loss_scale, dev_.threads());
  r.grad_norm = global_grad_norm(grads, dev_.threads());
  if (config_.loss_scale.enabled) {
    // DeepSpeed's overflow test: inf or NaN in the gradients (a non-finite loss gives them too).
    r.overflow = !std::isfinite(r.grad_norm);
    LJ_RETURN_IF_ERROR(scaler_.update(r.overflow));
  }
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    r.updated = false;
    r.optimizer_seconds = opt_clock() - t_opt;
    return r;
  }
  // torch.nn.utils.clip_grad_norm_ scales by max_norm / (norm + 1e-6); AdamW applies the
  // scale as it reads each gradient, so clipping costs no pass of its own.
  const bool clip = config_.grad_clip > 0 && r.grad_norm > config_.grad_clip;
  // The 16-bit copies are written in AdamW's pass (when they are fresh now, they stay so).
  adamw_->step(params_, grads, lr, clip ? config_.grad_clip / (r.grad_norm + 1e-6) : 1.0,
               low_fresh_ ? &low_params_ : nullptr);
  r.optimizer_seconds = opt_clock() - t_opt;
  return r;
}

}  // namespace lj
