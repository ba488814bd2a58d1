#include "train/flat_state.h"

#include <algorithm>

namespace lj {

int64_t flat_state_numel(const FlatLayout& layout, int stage) {
  LJ_CHECK(stage == 0 || stage == 1) << "flat state at ZeRO stage " << stage;
  return layout.held_numel(stage, ZeroSharded::optimizer_states);
}

namespace {

// m and v: one tensor per parameter, or (sharded) one tensor of the rank's shard.
bool sharded_states(int stage) {
  return zero_shards(stage, ZeroSharded::optimizer_states);
}

Status check_shapes(const FlatLayout& layout, int stage, const std::vector<ParamSpec>& specs,
                    const std::vector<Tensor>& params, const std::vector<Tensor>& m,
                    const std::vector<Tensor>& v) {
  const size_t states = sharded_states(stage) ? 1 : specs.size();
  if (params.size() != specs.size() || m.size() != states || v.size() != states) {
    return internal_error("host state has " + std::to_string(params.size()) + " parameters and " +
                          std::to_string(m.size()) + " moments; expected " +
                          std::to_string(specs.size()) + " and " + std::to_string(states));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (params[i].dims() != specs[i].dims || params[i].dtype() != DType::f32 ||
        (!sharded_states(stage) &&
         (m[i].dims() != specs[i].dims || v[i].dims() != specs[i].dims))) {
      return internal_error("host state of " + specs[i].name + " is not f32 " +
                            dims_to_string(specs[i].dims));
    }
  }
  if (sharded_states(stage) &&
      (m[0].numel() != layout.held_numel(stage, ZeroSharded::optimizer_states) ||
       v[0].numel() != layout.held_numel(stage, ZeroSharded::optimizer_states))) {
    return internal_error("host moments are not one shard of " +
                          std::to_string(layout.shard_numel()) + " elements");
  }
  return ok_status();
}

}  // namespace

Status flat_state_to_host(const FlatLayout& layout, int stage, const std::vector<ParamSpec>& specs,
                          const FlatState& flat, const CopyBytes& copy, Device& host,
                          std::vector<Tensor>* params, std::vector<Tensor>* m,
                          std::vector<Tensor>* v) {
  params->clear();
  m->clear();
  v->clear();
  for (size_t i = 0; i < specs.size(); ++i) {
    params->push_back(Tensor::empty(host, DType::f32, specs[i].dims, MemCategory::weights));
    LJ_RETURN_IF_ERROR(
        copy(params->back().raw(), flat.params + layout.param_begin(i), params->back().bytes()));
  }
  if (!sharded_states(stage)) {
    for (size_t i = 0; i < specs.size(); ++i) {
      m->push_back(Tensor::empty(host, DType::f32, specs[i].dims, MemCategory::optimizer));
      v->push_back(Tensor::empty(host, DType::f32, specs[i].dims, MemCategory::optimizer));
      LJ_RETURN_IF_ERROR(copy(m->back().raw(), flat.m + layout.param_begin(i), m->back().bytes()));
      LJ_RETURN_IF_ERROR(copy(v->back().raw(), flat.v + layout.param_begin(i), v->back().bytes()));
    }
  } else {
    const int64_t n = flat_state_numel(layout, stage);
    m->push_back(Tensor::empty(host, DType::f32, {n}, MemCategory::optimizer));
    v->push_back(Tensor::empty(host, DType::f32, {n}, MemCategory::optimizer));
    LJ_RETURN_IF_ERROR(copy(m->back().raw(), flat.m, m->back().bytes()));
    LJ_RETURN_IF_ERROR(copy(v->back().raw(), flat.v, v->back().bytes()));
  }
  return ok_status();
}

Status host_to_flat_state(const FlatLayout& layout, int stage, const std::vector<ParamSpec>& specs,
                          const std::vector<Tensor>& params, const std::vector<Tensor>& m,
                          const std::vector<Tensor>& v, const CopyBytes& copy,
                          const FlatState& flat) {
  LJ_RETURN_IF_ERROR(check_shapes(layout, stage, specs, params, m, v));
  for (size_t i = 0; i < specs.size(); ++i) {
    LJ_RETURN_IF_ERROR(
        copy(flat.params + layout.param_begin(i), params[i].raw(), params[i].bytes()));
    if (!sharded_states(stage)) {
      LJ_RETURN_IF_ERROR(copy(flat.m + layout.param_begin(i), m[i].raw(), m[i].bytes()));
      LJ_RETURN_IF_ERROR(copy(flat.v + layout.param_begin(i), v[i].raw(), v[i].bytes()));
    }
  }
  if (sharded_states(stage)) {
    LJ_RETURN_IF_ERROR(copy(flat.m, m[0].raw(), m[0].bytes()));
    LJ_RETURN_IF_ERROR(copy(flat.v, v[0].raw(), v[0].bytes()));
  }
  return ok_status();
}

GradBuckets grad_buckets(const FlatLayout& layout, int64_t bucket_numel) {
  GradBuckets g;
  g.buckets = split_buckets({0, layout.numel()}, std::max<int64_t>(bucket_numel, 1));
  g.of_param.resize(layout.num_params());
  for (size_t i = 0; i < layout.num_params(); ++i) {
    const int64_t b = layout.param_begin(i);
    const int64_t e = i + 1 < layout.num_params() ? layout.param_begin(i + 1) : layout.numel();
    for (size_t k = 0; k < g.buckets.size(); ++k) {
      if (g.buckets[k].begin < e && b < g.buckets[k].end) g.of_param[i].push_back(k);
    }
  }
  return g;
}

std::vector<size_t> GradBuckets::waits() const {
  std::vector<size_t> w(buckets.size(), 0);
  for (const auto& bs : of_param)
    for (size_t b : bs) ++w[b];
  return w;
}

}  // namespace lj
