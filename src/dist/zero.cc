#include "dist/zero.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.h"

namespace lj {

FlatLayout::FlatLayout(std::vector<int64_t> numels, int world_size)
    : numels_(std::move(numels)), world_size_(world_size) {
  LJ_CHECK(world_size >= 1) << world_size;
  begin_.reserve(numels_.size());
  for (int64_t n : numels_) {
    LJ_CHECK(n >= 0) << n;
    begin_.push_back(numel_);
    numel_ += n;
  }
  numel_padded_ = (numel_ + world_size - 1) / world_size * world_size;
}

FlatLayout FlatLayout::of(const std::vector<Tensor>& params, int world_size) {
  std::vector<int64_t> numels;
  for (const Tensor& p : params) numels.push_back(p.numel());
  return FlatLayout(std::move(numels), world_size);
}

FlatRange FlatLayout::shard(int rank) const {
  LJ_CHECK(rank >= 0 && rank < world_size_) << rank;
  const int64_t s = shard_numel();
  return {rank * s, (rank + 1) * s};
}

FlatRange FlatLayout::held(int rank, int stage, ZeroSharded what) const {
  if (!zero_shards(stage, what)) return {0, numel_};
  const FlatRange s = shard(rank);
  return {std::min(s.begin, numel_), std::min(s.end, numel_)};
}

int64_t FlatLayout::held_numel(int stage, ZeroSharded what) const {
  return zero_shards(stage, what) ? shard_numel() : numel_;
}

std::vector<FlatPiece> FlatLayout::pieces(FlatRange r) const {
  std::vector<FlatPiece> out;
  const int64_t end = std::min(r.end, numel_);
  if (r.begin >= end) return out;
  // The last parameter that starts at or before r.begin.
  size_t i = static_cast<size_t>(std::upper_bound(begin_.begin(), begin_.end(), r.begin) -
                                 begin_.begin()) -
             1;
  for (; i < numels_.size() && begin_[i] < end; ++i) {
    const int64_t lo = std::max(r.begin, begin_[i]);
    const int64_t hi = std::min(end, begin_[i] + numels_[i]);
    if (hi > lo) out.push_back({i, lo - begin_[i], lo, hi - lo});
  }
  return out;
}

std::vector<FlatRange> split_buckets(FlatRange r, int64_t bucket_numel) {
  LJ_CHECK(bucket_numel >= 1) << bucket_numel;
  std::vector<FlatRange> out;
  for (int64_t b = r.begin; b < r.end; b += bucket_numel) {
    out.push_back({b, std::min(r.end, b + bucket_numel)});
  }
  return out;
}

int64_t per_rank_bucket(int64_t bucket_numel, int world_size) {
  return std::max<int64_t>(1, bucket_numel / world_size);
}

void pack_flat(const FlatLayout& layout, const std::vector<Tensor>& tensors, FlatRange r,
               float* out) {
  int64_t written = r.begin;  // flat position out[0] stands for
  for (const FlatPiece& p : layout.pieces(r)) {
    std::memcpy(out + (p.flat_offset - r.begin), tensors[p.param].data<float>() + p.param_offset,
                static_cast<size_t>(p.count) * sizeof(float));
    written = p.flat_offset + p.count;
  }
  // Only the padding follows the last piece.
  std::fill(out + (written - r.begin), out + r.size(), 0.0f);
}

void unpack_flat(const FlatLayout& layout, const float* in, float scale, FlatRange r,
                 std::vector<Tensor>& tensors) {
  for (const FlatPiece& p : layout.pieces(r)) {
    float* dst = tensors[p.param].data<float>() + p.param_offset;
    const float* src = in + (p.flat_offset - r.begin);
    for (int64_t k = 0; k < p.count; ++k) dst[k] = src[k] * scale;
  }
}

int64_t all_reduce_buffer_numel(const FlatLayout& layout, int64_t reduce_bucket_size) {
  return std::min(reduce_bucket_size, layout.numel());
}

int64_t reduce_scatter_buffer_numel(const FlatLayout& layout, int64_t reduce_bucket_size) {
  const int world = layout.world_size();
  return std::min(per_rank_bucket(reduce_bucket_size, world), layout.shard_numel()) * world;
}

int64_t all_gather_send_numel(const FlatLayout& layout, int64_t allgather_bucket_size) {
  return std::min(per_rank_bucket(allgather_bucket_size, layout.world_size()),
                  layout.shard_numel());
}

ZeroMemory zero_memory(const FlatLayout& layout, const ZeroConfig& zero) {
  ZeroMemory m;
  m.adam_state_numel = layout.held_numel(zero.stage, ZeroSharded::optimizer_states);
  if (zero.shards(ZeroSharded::parameters)) {
    // The collectives are all in the graph (gathers, reduce-scatters); the step updates the
    // shard in place.
    m.grad_shard_numel = layout.held_numel(zero.stage, ZeroSharded::gradients);
    m.param_shard_numel = layout.held_numel(zero.stage, ZeroSharded::parameters);
    return m;
  }
  if (zero.shards(ZeroSharded::gradients)) {
    m.grad_shard_numel = layout.held_numel(zero.stage, ZeroSharded::gradients);
    m.reduce_buffer_numel = reduce_scatter_buffer_numel(layout, zero.reduce_bucket_size);
    m.frees_full_grads = true;
  } else {
    m.reduce_buffer_numel = all_reduce_buffer_numel(layout, zero.reduce_bucket_size);
  }
  if (zero.shards(ZeroSharded::optimizer_states)) {
    // Each rank updated its shard: the parameters are all-gathered.
    m.gather_send_numel = all_gather_send_numel(layout, zero.allgather_bucket_size);
    m.gather_recv_numel = m.gather_send_numel * layout.world_size();
  }
  return m;
}

namespace {

// Transient: the step's large buffers reuse what the step freed (stage 2's full gradients and
// bucket) and otherwise go back to the system after the step, never left reserved.
Tensor buffer(Device& dev, int64_t numel) {
  return Tensor::empty_transient(dev, DType::f32, {std::max<int64_t>(numel, 1)},
                                 MemCategory::workspace);
}

}  // namespace

Status all_reduce_grads(Communicator& comm, Device& dev, const FlatLayout& layout,
                        std::vector<Tensor>& grads, int64_t reduce_bucket_size, float scale) {
  const std::vector<FlatRange> buckets = split_buckets({0, layout.numel()}, reduce_bucket_size);
  if (buckets.empty()) return ok_status();
  Tensor buf = buffer(dev, all_reduce_buffer_numel(layout, reduce_bucket_size));
  float* b = buf.data<float>();
  for (const FlatRange& r : buckets) {
    const auto n = static_cast<size_t>(r.size());
    pack_flat(layout, grads, r, b);
    LJ_RETURN_IF_ERROR(comm.all_reduce_sum(std::span<const float>(b, n), std::span<float>(b, n)));
    unpack_flat(layout, b, scale, r, grads);
  }
  return ok_status();
}

Status reduce_scatter_grads(Communicator& comm, Device& dev, const FlatLayout& layout,
                            const std::vector<Tensor>& grads, int64_t reduce_bucket_size,
                            float scale, float* shard_out) {
  const int world = layout.world_size();
  const int64_t shard = layout.shard_numel();
  const int64_t chunk = per_rank_bucket(reduce_bucket_size, world);
  Tensor send = buffer(dev, reduce_scatter_buffer_numel(layout, reduce_bucket_size));
  float* s = send.data<float>();
  for (const FlatRange& local : split_buckets({0, shard}, chunk)) {
    const int64_t n = local.size();
    for (int r = 0; r < world; ++r) {
      const int64_t base = layout.shard(r).begin;
      pack_flat(layout, grads, {base + local.begin, base + local.end}, s + r * n);
    }
    float* out = shard_out + local.begin;
    LJ_RETURN_IF_ERROR(
        comm.reduce_scatter_sum(std::span<const float>(s, static_cast<size_t>(n * world)),
                                std::span<float>(out, static_cast<size_t>(n))));
    for (int64_t k = 0; k < n; ++k) out[k] *= scale;
  }
  return ok_status();
}

Status all_gather_params(Communicator& comm, Device& dev, const FlatLayout& layout,
                         std::vector<Tensor>& params, int64_t allgather_bucket_size) {
  const int world = layout.world_size();
  const int64_t shard = layout.shard_numel();
  const int64_t chunk = per_rank_bucket(allgather_bucket_size, world);
  const int64_t first = all_gather_send_numel(layout, allgather_bucket_size);
  Tensor send = buffer(dev, first), recv = buffer(dev, first * world);
  float* s = send.data<float>();
  float* g = recv.data<float>();
  const int64_t mine = layout.shard(comm.rank()).begin;
  for (const FlatRange& local : split_buckets({0, shard}, chunk)) {
    const int64_t n = local.size();
    pack_flat(layout, params, {mine + local.begin, mine + local.end}, s);
    LJ_RETURN_IF_ERROR(comm.all_gather(std::span<const float>(s, static_cast<size_t>(n)),
                                       std::span<float>(g, static_cast<size_t>(n * world))));
    for (int r = 0; r < world; ++r) {
      if (r == comm.rank()) continue;  // already in place
      const int64_t base = layout.shard(r).begin;
      unpack_flat(layout, g + r * n, 1.0f, {base + local.begin, base + local.end}, params);
    }
  }
  return ok_status();
}

}  // namespace lj
