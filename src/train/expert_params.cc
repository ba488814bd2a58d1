#include "train/expert_params.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "core/check.h"
#include "core/units.h"
#include "train/sharded_checkpoint.h"

namespace lj {
namespace {

std::span<const float> all_of(const Tensor& t) {
  return {t.data<float>(), static_cast<size_t>(t.numel())};
}
std::span<float> all_of(Tensor& t) {
  return {t.data<float>(), static_cast<size_t>(t.numel())};
}

// One tensor per parameter of `layout`, copied out of the whole flat vector `flat`.
std::vector<Tensor> unflatten(Device& dev, const FlatLayout& layout, const float* flat,
                              const std::vector<ParamSpec>& specs, MemCategory category) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor t = Tensor::empty(dev, DType::f32, specs[i].dims, category);
    std::memcpy(t.raw(), flat + layout.param_begin(i), t.bytes());
    out.push_back(std::move(t));
  }
  return out;
}

// Every rank's shard of a flat vector over `comm` (f32 (S) each), as the whole padded vector.
StatusOr<Tensor> gather_flat(Communicator& comm, Device& dev, const FlatLayout& layout,
                             const Tensor& shard) {
  LJ_CHECK_EQ(shard.numel(), layout.shard_numel());
  Tensor whole = Tensor::empty(dev, DType::f32, {layout.numel_padded()}, MemCategory::optimizer);
  LJ_RETURN_IF_ERROR(comm.all_gather(all_of(shard), all_of(whole)));
  return whole;
}

std::vector<ParamSpec> pick_specs(const std::vector<ParamSpec>& specs,
                                  const std::vector<size_t>& which) {
  std::vector<ParamSpec> out;
  for (size_t i : which) out.push_back(specs[i]);
  return out;
}

}  // namespace

bool shards_experts(const DataParallel& dp) {
  return dp.comm != nullptr && dp.experts != nullptr && dp.experts->world_size() > 1 &&
         dp.expert_data != nullptr;
}

ParamSplit ParamSplit::of(const std::vector<ParamSpec>& specs) {
  ParamSplit s;
  for (size_t i = 0; i < specs.size(); ++i) (specs[i].is_expert ? s.experts : s.dense).push_back(i);
  return s;
}

std::vector<Tensor> ParamSplit::pick(const std::vector<Tensor>& all,
                                     const std::vector<size_t>& which) {
  std::vector<Tensor> out;
  for (size_t i : which) out.push_back(all[i]);
  return out;
}

StatusOr<std::unique_ptr<ExpertParams>> ExpertParams::create(Device& dev, const DataParallel& dp,
                                                             std::vector<ParamSpec> local,
                                                             std::vector<ParamSpec> whole,
                                                             const std::vector<Tensor>& experts,
                                                             AdamWConfig adamw) {
  LJ_CHECK(shards_experts(dp));
  LJ_CHECK_EQ(local.size(), whole.size());
  std::unique_ptr<ExpertParams> e(new ExpertParams(dp, std::move(local), std::move(whole)));
  e->split_ = ParamSplit::of(e->local_);
  LJ_CHECK_EQ(experts.size(), e->split_.experts.size());
  // Stage 3 keeps the experts' weights whole on the group's ranks: stage 2 there.
  ZeroConfig zero = dp.zero;
  zero.stage = std::min(zero.stage, 2);
  const DataParallel group{
      .comm = dp.expert_data, .zero = zero, .grad_divisor = dp.comm->world_size()};
  LJ_ASSIGN_OR_RETURN(e->zero_, ZeroOptimizer::create(dev, group, experts, adamw));
  return e;
}

StatusOr<ZeroReduced> ExpertParams::reduce(std::vector<Tensor> grads, double grad_unscale) {
  LJ_ASSIGN_OR_RETURN(ZeroReduced r, zero_->reduce(std::move(grads), 0.0, /*grads_reduced=*/false,
                                                   grad_unscale, /*reduce_loss=*/false));
  // Each rank of the expert-parallel group holds other experts: their sums add up.
  const double t0 = now_seconds();
  LJ_ASSIGN_OR_RETURN(r.sum_squares, dp_.experts->all_reduce_sum(r.sum_squares));
  r.comm_seconds += now_seconds() - t0;
  return r;
}

StatusOr<double> ExpertParams::update(std::vector<Tensor>& experts, double lr, double clip) {
  return zero_->update(experts, lr, clip);
}

StatusOr<std::vector<Tensor>> ExpertParams::whole_params(Device& dev,
                                                         const std::vector<Tensor>& local) {
  LJ_CHECK_EQ(local.size(), whole_.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < whole_.size(); ++i) {
    if (!local_[i].is_expert) {
      out.push_back(local[i]);
      continue;
    }
    Tensor t = Tensor::empty(dev, DType::f32, whole_[i].dims, MemCategory::weights);
    LJ_RETURN_IF_ERROR(dp_.experts->all_gather(all_of(local[i]), all_of(t)));
    out.push_back(std::move(t));
  }
  return out;
}

void ExpertParams::set_local_params(const std::vector<Tensor>& whole,
                                    std::vector<Tensor>& local) const {
  LJ_CHECK_EQ(whole.size(), local_.size());
  LJ_CHECK_EQ(local.size(), local_.size());
  for (size_t i = 0; i < local_.size(); ++i) {
    const float* src = whole[i].data<float>() + local_[i].expert_offset;
    if (src != local[i].data<float>()) std::memcpy(local[i].raw(), src, local[i].bytes());
  }
}

StatusOr<std::vector<Tensor>> ExpertParams::per_param_moments(Device& dev,
                                                              const FlatLayout& dense_layout,
                                                              const std::vector<Tensor>& dense,
                                                              bool v) {
  const std::vector<ParamSpec> dense_specs = pick_specs(whole_, split_.dense);
  const std::vector<ParamSpec> local_experts = pick_specs(local_, split_.experts);
  // The dense parameters': whole per parameter (stage 0), or gathered from the world's shards.
  std::vector<Tensor> d = dense;
  if (dp_.zero.shards(ZeroSharded::optimizer_states)) {
    LJ_CHECK_EQ(dense.size(), 1u);
    LJ_ASSIGN_OR_RETURN(Tensor flat, gather_flat(*dp_.comm, dev, dense_layout, dense[0]));
    d = unflatten(dev, dense_layout, flat.data<float>(), dense_specs, MemCategory::optimizer);
  }
  // The rank's experts': from the group's shards, then every expert over the expert-parallel
  // group.
  std::vector<Tensor>& mine = v ? zero_->adamw().v() : zero_->adamw().m();
  std::vector<Tensor> e = mine;
  if (zero_->config().shards(ZeroSharded::optimizer_states)) {
    LJ_CHECK_EQ(mine.size(), 1u);
    LJ_ASSIGN_OR_RETURN(Tensor flat, gather_flat(*dp_.expert_data, dev, zero_->layout(), mine[0]));
    e = unflatten(dev, zero_->layout(), flat.data<float>(), local_experts, MemCategory::optimizer);
  }
  std::vector<Tensor> out(whole_.size());
  for (size_t k = 0; k < split_.dense.size(); ++k) out[split_.dense[k]] = d[k];
  for (size_t k = 0; k < split_.experts.size(); ++k) {
    const size_t i = split_.experts[k];
    Tensor t = Tensor::empty(dev, DType::f32, whole_[i].dims, MemCategory::optimizer);
    LJ_RETURN_IF_ERROR(dp_.experts->all_gather(all_of(e[k]), all_of(t)));
    out[i] = std::move(t);
  }
  return out;
}

StatusOr<std::vector<Tensor>> ExpertParams::whole_moments(Device& dev,
                                                          const FlatLayout& dense_layout,
                                                          const std::vector<Tensor>& dense,
                                                          bool v) {
  LJ_ASSIGN_OR_RETURN(std::vector<Tensor> per, per_param_moments(dev, dense_layout, dense, v));
  if (!dp_.zero.shards(ZeroSharded::optimizer_states)) return per;
  // This rank's shard of the whole flat vector, as a run without expert parallelism holds it.
  const FlatLayout layout = FlatLayout::of(per, dp_.comm->world_size());
  Tensor shard = Tensor::zeros(dev, DType::f32,
                               {layout.held_numel(dp_.zero.stage, ZeroSharded::optimizer_states)},
                               MemCategory::optimizer);
  pack_flat(layout, per, layout.shard(dp_.comm->rank()), shard.data<float>());
  return std::vector<Tensor>{std::move(shard)};
}

Status ExpertParams::set_moments(Device& dev, const FlatLayout& dense_layout,
                                 const std::vector<Tensor>& whole, std::vector<Tensor>& dense,
                                 bool v) {
  // Per parameter, whole: as given (stage 0), or gathered from the world's shards of the whole
  // flat vector.
  std::vector<Tensor> per = whole;
  if (dp_.zero.shards(ZeroSharded::optimizer_states)) {
    LJ_CHECK_EQ(whole.size(), 1u);
    const FlatLayout layout = flat_layout_of(whole_, dp_.comm->world_size());
    LJ_ASSIGN_OR_RETURN(Tensor flat, gather_flat(*dp_.comm, dev, layout, whole[0]));
    per = unflatten(dev, layout, flat.data<float>(), whole_, MemCategory::optimizer);
  }
  // The dense group's: per dense parameter, or this rank's shard of their flat vector.
  const std::vector<Tensor> d = ParamSplit::pick(per, split_.dense);
  if (dp_.zero.shards(ZeroSharded::optimizer_states)) {
    LJ_CHECK_EQ(dense.size(), 1u);
    pack_flat(dense_layout, d, dense_layout.shard(dp_.comm->rank()), dense[0].data<float>());
  } else {
    LJ_CHECK_EQ(dense.size(), d.size());
    for (size_t k = 0; k < d.size(); ++k)
      std::memcpy(dense[k].data<float>(), d[k].data<float>(), d[k].bytes());
  }
  // The rank's experts: their slices, per parameter or as the group's shard.
  std::vector<Tensor> e;
  for (size_t i : split_.experts) {
    Tensor t = Tensor::empty(dev, DType::f32, local_[i].dims, MemCategory::optimizer);
    std::memcpy(t.raw(), per[i].data<float>() + local_[i].expert_offset, t.bytes());
    e.push_back(std::move(t));
  }
  std::vector<Tensor>& mine = v ? zero_->adamw().v() : zero_->adamw().m();
  if (zero_->config().shards(ZeroSharded::optimizer_states)) {
    LJ_CHECK_EQ(mine.size(), 1u);
    pack_flat(zero_->layout(), e, zero_->layout().shard(dp_.expert_data->rank()),
              mine[0].data<float>());
  } else {
    LJ_CHECK_EQ(mine.size(), e.size());
    for (size_t k = 0; k < e.size(); ++k) std::memcpy(mine[k].raw(), e[k].raw(), e[k].bytes());
  }
  return ok_status();
}

}  // namespace lj
