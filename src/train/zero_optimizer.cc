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
  std::unique_ptr<ZeroOptimizer> z(new ZeroOptimizer(
      dev, *dp.comm, dp.zero, FlatLayout::of(params, dp.comm->world_size()), dp.divisor()));
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
  std::unique_ptr<ZeroOptimizer> z(
      new ZeroOptimizer(dev, *dp.comm, dp.zero, std::move(layout), dp.divisor()));
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

StatusOr<ZeroReduced> ZeroOptimizer::reduce(std::vector<Tensor> grads, double local_loss,
                                            bool grads_reduced, double grad_unscale,
                                            bool reduce_loss) {
  if (!(grads_reduced && zero_.shards(ZeroSharded::gradients)))
    LJ_CHECK_EQ(grads.size(), layout_.num_params());
  LJ_CHECK(!zero_.shards(ZeroSharded::parameters) || grads_reduced)
      << "stage 3 reduces in backward";
  const int threads = dev_.threads();
  const float mean = 1.0f / static_cast<float>(divisor_);
  ZeroReduced r;
  // Times one collective (with its packing) into r.comm_seconds.
  double t0 = now_seconds();
  const auto comm_done = [&] {
    const double t = now_seconds();
    r.comm_seconds += t - t0;
    t0 = t;
  };
  r.loss = local_loss;
  if (reduce_loss) {
    LJ_ASSIGN_OR_RETURN(const double loss_sum, comm_.all_reduce_sum(local_loss));
    comm_done();
    r.loss = loss_sum / comm_.world_size();
  }

  // Average the gradients: every rank gets all of them (0, 1) or its shard (2).
  if (grads_reduced) {
    // backward's collectives averaged them (train/grad_sync.h): stage 2's are in the shard
  } else if (zero_.shards(ZeroSharded::gradients)) {  // stage 2 (3 reduces in backward)
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
  grads_ = std::move(grads);

  // fp16: the loss scale undone after the reduction.
  if (grad_unscale != 1.0) scale_held(grad_unscale);

  // The sum of squares: stage 0 holds every gradient; 1-3 sum over the shard, then ranks.
  if (!zero_.shards(ZeroSharded::optimizer_states)) {
    for (const Tensor& t : grads_)
      accumulate_squares(t.data<float>(), t.numel(), threads, &r.sum_squares);
  } else {
    double sum = 0;
    for (const FlatPiece& p : layout_.pieces(layout_.shard(comm_.rank())))
      accumulate_squares(held_grad(p), p.count, threads, &sum);
    t0 = now_seconds();
    LJ_ASSIGN_OR_RETURN(r.sum_squares, comm_.all_reduce_sum(sum));
    comm_done();
  }
  return r;
}

float* ZeroOptimizer::held_grad(const FlatPiece& p) {
  // Stages 2, 3: a piece lies within one part (parts are buckets of whole parameters, or the
  // whole shard).
  if (!zero_.shards(ZeroSharded::gradients)) return grads_[p.param].data<float>() + p.param_offset;
  const int64_t s = p.flat_offset - layout_.shard(comm_.rank()).begin;
  auto it = grad_parts_.upper_bound(s);
  LJ_CHECK(it != grad_parts_.begin()) << "no gradient for shard offset " << s;
  --it;
  LJ_CHECK(s + p.count <= it->first + it->second.numel()) << "shard offset " << s;
  return it->second.data<float>() + (s - it->first);
}

void ZeroOptimizer::scale_held(double factor) {
  if (!zero_.shards(ZeroSharded::optimizer_states)) {
    scale_grads(grads_, factor, dev_.threads());
    return;
  }
  const auto f = static_cast<float>(factor);
  for (const FlatPiece& p : layout_.pieces(layout_.shard(comm_.rank()))) {
    float* g = held_grad(p);
    for (int64_t k = 0; k < p.count; ++k) g[k] *= f;
  }
}

void ZeroOptimizer::discard() {
  grads_.clear();
  grad_parts_.clear();
}

StatusOr<double> ZeroOptimizer::update(std::vector<Tensor>& params, double lr, double clip) {
  // The reduced gradients (and stage 2-3's shard) live until the end of the update, whichever
  // way it ends.
  struct Discard {
    ZeroOptimizer& z;
    ~Discard() { z.discard(); }
  } discard_at_end{*this};
  if (clip != 1.0) scale_held(clip);
  if (!zero_.shards(ZeroSharded::optimizer_states)) {
    adamw_->step(params, grads_, lr);
    return 0.0;
  }
  const FlatRange mine = layout_.shard(comm_.rank());
  const AdamWStepConstants c = adamw_->begin_step(lr);
  float* m = adamw_->m()[0].data<float>();
  float* v = adamw_->v()[0].data<float>();
  for (const FlatPiece& p : layout_.pieces(mine)) {
    const int64_t s = p.flat_offset - mine.begin;
    float* w = zero_.shards(ZeroSharded::parameters)
                   ? param_shard_.data<float>() + s
                   : params[p.param].data<float>() + p.param_offset;
    adamw_update(c, w, held_grad(p), m + s, v + s, p.count, dev_.threads());
  }
  if (zero_.shards(ZeroSharded::parameters)) return 0.0;  // backward gathers from the shards
  const double t0 = now_seconds();
  LJ_RETURN_IF_ERROR(all_gather_params(comm_, dev_, layout_, params, zero_.allgather_bucket_size));
  return now_seconds() - t0;
}

double clip_factor(double grad_norm, double grad_clip) {
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6).
  return grad_clip > 0 && grad_norm > grad_clip ? grad_clip / (grad_norm + 1e-6) : 1.0;
}

StatusOr<ZeroStepResult> ZeroOptimizer::step(std::vector<Tensor>& params, std::vector<Tensor> grads,
                                             double local_loss, double lr, double grad_clip,
                                             bool grads_reduced, double grad_unscale) {
  struct Discard {
    ZeroOptimizer& z;
    ~Discard() { z.discard(); }
  } discard_at_end{*this};
  LJ_ASSIGN_OR_RETURN(const ZeroReduced red, reduce(std::move(grads), local_loss, grads_reduced,
                                                    grad_unscale, /*reduce_loss=*/true));
  ZeroStepResult r;
  r.loss = red.loss;
  r.comm_seconds = red.comm_seconds;
  r.grad_norm = std::sqrt(red.sum_squares);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    r.updated = false;
    return r;
  }
  LJ_ASSIGN_OR_RETURN(const double gather_seconds,
                      update(params, lr, clip_factor(r.grad_norm, grad_clip)));
  r.comm_seconds += gather_seconds;
  return r;
}

}  // namespace lj
