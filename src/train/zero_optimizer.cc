#include "train/zero_optimizer.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/units.h"

namespace lj {

StatusOr<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::create(Device& dev, const DataParallel& dp,
                                                               const std::vector<Tensor>& params,
                                                               AdamWConfig adamw) {
  LJ_CHECK(dp.comm != nullptr);
  LJ_RETURN_IF_ERROR(dp.zero.validate());
  for (const Tensor& p : params) LJ_CHECK(p.dtype() == DType::f32) << "ZeRO shards f32 parameters";
  std::unique_ptr<ZeroOptimizer> z(
      new ZeroOptimizer(dev, *dp.comm, dp.zero, FlatLayout::of(params, dp.comm->world_size())));
  const FlatLayout& layout = z->layout_;
  if (!dp.zero.shards(ZeroSharded::optimizer_states)) {
    z->adamw_ = std::make_unique<AdamW>(dev, params, adamw);
  } else {
    const int64_t states = layout.held_numel(dp.zero.stage, ZeroSharded::optimizer_states);
    z->adamw_ = std::make_unique<AdamW>(dev, std::vector<int64_t>{states}, adamw);
    if (dp.zero.shards(ZeroSharded::parameters)) {
      const int64_t shard = layout.held_numel(dp.zero.stage, ZeroSharded::parameters);
      z->param_shard_ = Tensor::zeros(dev, DType::f32, {shard}, MemCategory::weights);
      pack_flat(z->layout_, params, z->layout_.shard(dp.comm->rank()),
                z->param_shard_.data<float>());
    }
  }
  return z;
}

StatusOr<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::create_sharded(
    Device& dev, const DataParallel& dp, FlatLayout layout, Tensor param_shard, AdamWConfig adamw) {
  LJ_CHECK(dp.comm != nullptr && dp.zero.shards(ZeroSharded::parameters));
  LJ_RETURN_IF_ERROR(dp.zero.validate());
  LJ_CHECK_EQ(param_shard.numel(), layout.held_numel(dp.zero.stage, ZeroSharded::parameters));
  const int64_t states = layout.held_numel(dp.zero.stage, ZeroSharded::optimizer_states);
  std::unique_ptr<ZeroOptimizer> z(new ZeroOptimizer(dev, *dp.comm, dp.zero, std::move(layout)));
  z->param_shard_ = std::move(param_shard);
  z->adamw_ = std::make_unique<AdamW>(dev, std::vector<int64_t>{states}, adamw);
  return z;
}

float* ZeroOptimizer::grad_part(int64_t begin, int64_t count) {
  LJ_CHECK(zero_.shards(ZeroSharded::gradients) && begin >= 0 && count > 0 &&
           begin + count <= layout_.shard_numel());
  auto it = grad_parts_.find(begin);
  if (it == grad_parts_.end()) {
    // Uncached, as it is freed at the end of every step (runtime/tensor.h).
    Tensor t = Tensor::empty_uncached(dev_, DType::f32, {count}, MemCategory::grads);
    std::memset(t.raw(), 0, t.bytes());
    it = grad_parts_.emplace(begin, std::move(t)).first;
  }
  LJ_CHECK_EQ(it->second.numel(), count) << "gradient shard part at " << begin;
  return it->second.data<float>();
}

StatusOr<ZeroStepResult> ZeroOptimizer::step(std::vector<Tensor>& params, std::vector<Tensor> grads,
                                             double local_loss, double lr, double grad_clip,
                                             bool grads_reduced, double grad_unscale) {
  if (!(grads_reduced && zero_.shards(ZeroSharded::gradients)))
    LJ_CHECK_EQ(grads.size(), layout_.num_params());
  LJ_CHECK(!zero_.shards(ZeroSharded::parameters) || grads_reduced)
      << "stage 3 reduces in backward";
  const int threads = dev_.threads();
  const int world = comm_.world_size();
  const float mean = 1.0f / static_cast<float>(world);
  ZeroStepResult r;
  // Stages 2, 3: the gradient shard lives until the end of the step, whichever way it ends.
  struct FreeShard {
    std::map<int64_t, Tensor>& parts;
    ~FreeShard() { parts.clear(); }
  } free_shard{grad_parts_};
  // Times one collective (with its packing) into r.comm_seconds.
  double t0 = now_seconds();
  const auto comm_done = [&] {
    const double t = now_seconds();
    r.comm_seconds += t - t0;
    t0 = t;
  };
  LJ_ASSIGN_OR_RETURN(const double loss_sum, comm_.all_reduce_sum(local_loss));
  comm_done();
  r.loss = loss_sum / world;

  // Average the gradients: every rank gets all of them (0, 1) or its shard (2).
  const FlatRange mine = layout_.shard(comm_.rank());
  const std::vector<FlatPiece> pieces = layout_.pieces(mine);
  const bool sharded_states = zero_.shards(ZeroSharded::optimizer_states);
  const bool sharded_grads =
      zero_.shards(ZeroSharded::gradients);  // in grad_parts_, by offset in `mine`
  if (grads_reduced) {
    // backward's collectives averaged them (train/grad_sync.h): stage 2's are in the shard
  } else if (sharded_grads) {  // stage 2 (stage 3 reduces in backward, checked above)
    float* shard_grad = grad_part(0, layout_.shard_numel());
    t0 = now_seconds();
    LJ_RETURN_IF_ERROR(reduce_scatter_grads(comm_, dev_, layout_, grads, zero_.reduce_bucket_size,
                                            mean, shard_grad));
    grads.clear();  // only the shard is needed from here on
  } else {
    t0 = now_seconds();
    LJ_RETURN_IF_ERROR(
        all_reduce_grads(comm_, dev_, layout_, grads, zero_.reduce_bucket_size, mean));
  }
  if (!grads_reduced) comm_done();
  // The gradient elements of a piece of this rank's shard.
  // Stages 2, 3: a piece lies within one part (parts are buckets of whole parameters, or the
  // whole shard).
  auto grad_of = [&](const FlatPiece& p) -> float* {
    if (!sharded_grads) return grads[p.param].data<float>() + p.param_offset;
    const int64_t s = p.flat_offset - mine.begin;
    auto it = grad_parts_.upper_bound(s);
    LJ_CHECK(it != grad_parts_.begin()) << "no gradient for shard offset " << s;
    --it;
    LJ_CHECK(s + p.count <= it->first + it->second.numel()) << "shard offset " << s;
    return it->second.data<float>() + (s - it->first);
  };

  // Scales the gradients this rank updates: all of them (stage 0) or its shard's (1-3).
  const auto scale_updated = [&](double factor) {
    if (!sharded_states) {
      scale_grads(grads, factor, threads);
      return;
    }
    const auto f = static_cast<float>(factor);
    for (const FlatPiece& p : pieces) {
      float* g = grad_of(p);
      for (int64_t k = 0; k < p.count; ++k) g[k] *= f;
    }
  };

  // fp16: the loss scale undone after the reduction.
  if (grad_unscale != 1.0) scale_updated(grad_unscale);

  // Global norm: stage 0 holds every gradient; 1 and 2 sum squares over the shard, then ranks.
  if (!sharded_states) {
    r.grad_norm = global_grad_norm(grads, threads);
  } else {
    double sum = 0;
    for (const FlatPiece& p : pieces) accumulate_squares(grad_of(p), p.count, threads, &sum);
    t0 = now_seconds();
    LJ_ASSIGN_OR_RETURN(const double total, comm_.all_reduce_sum(sum));
    comm_done();
    r.grad_norm = std::sqrt(total);
  }
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    r.updated = false;
    return r;
  }
  if (grad_clip > 0 && r.grad_norm > grad_clip) {
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6).
    scale_updated(grad_clip / (r.grad_norm + 1e-6));
  }

  if (!sharded_states) {
    adamw_->step(params, grads, lr);
    return r;
  }
  const AdamWStepConstants c = adamw_->begin_step(lr);
  float* m = adamw_->m()[0].data<float>();
  float* v = adamw_->v()[0].data<float>();
  for (const FlatPiece& p : pieces) {
    const int64_t s = p.flat_offset - mine.begin;
    float* w = zero_.shards(ZeroSharded::parameters)
                   ? param_shard_.data<float>() + s
                   : params[p.param].data<float>() + p.param_offset;
    adamw_update(c, w, grad_of(p), m + s, v + s, p.count, threads);
  }
  if (zero_.shards(ZeroSharded::parameters))
    return r;  // backward gathers what it needs from the shards
  t0 = now_seconds();
  LJ_RETURN_IF_ERROR(all_gather_params(comm_, dev_, layout_, params, zero_.allgather_bucket_size));
  comm_done();
  return r;
}

}  // namespace lj
