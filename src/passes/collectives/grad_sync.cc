#include "passes/collectives/grad_sync.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "models/moe.h"
#include "passes/collectives/param_gather.h"

namespace lj {

std::vector<GradBucket> grad_buckets(const std::vector<int64_t>& numels,
                                     const GradSyncOptions& options) {
  LJ_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size);
  LJ_CHECK(options.zero.reduce_bucket_size >= 1) << options.zero.reduce_bucket_size;
  std::vector<int64_t> begin(numels.size() + 1, 0);
  for (size_t i = 0; i < numels.size(); ++i) begin[i + 1] = begin[i] + numels[i];
  const int64_t world = options.world_size;
  const int64_t shard = (begin.back() + world - 1) / world;
  const int64_t mine = options.rank * shard;
  std::vector<GradBucket> out;
  auto end = static_cast<int64_t>(numels.size());
  while (end > 0) {
    int64_t first = end - 1;  // a bucket takes at least one parameter
    while (first > 0 && begin[end] - begin[first - 1] <= options.zero.reduce_bucket_size) --first;
    GradBucket b;
    b.param_begin = first;
    b.param_end = end;
    b.flat_begin = begin[static_cast<size_t>(first)];
    b.flat_end = begin[static_cast<size_t>(end)];
    const int64_t lo = std::max(b.flat_begin, mine);
    const int64_t hi = std::min(b.flat_end, mine + shard);
    b.recv_begin = hi > lo ? lo - mine : 0;
    b.recv_count = std::max<int64_t>(0, hi - lo);
    out.push_back(b);
    end = first;
  }
  return out;
}

StatusOr<bool> GradSyncPass::run(Graph& g) {
  if (!options_.enabled()) return false;
  const int stage = options_.zero.stage;
  if (stage < 0 || stage > 3) {
    return invalid_argument("grad_sync: ZeRO stage " + std::to_string(stage) +
                            " has no gradient collectives here");
  }
  // The gradients, in parameter order, and where each output sits.
  std::vector<size_t> out_index;
  std::vector<int64_t> numels;
  std::vector<std::vector<int64_t>> dims;
  const auto reduced_here = [&](const std::string& output) {
    return output.rfind("grad:", 0) == 0 &&
           !(options_.skip_experts && is_expert_param(output.substr(5)));
  };
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    if (!reduced_here(g.outputs()[i].name)) continue;
    const TypedShape& t = g.type(g.outputs()[i].value);
    std::vector<int64_t> d;
    if (t.dtype != DType::f32 || !t.shape.eval(SymEnv(), &d)) {
      return invalid_argument("grad_sync: gradient " + g.outputs()[i].name + " is " +
                              t.to_string() + "; the collectives reduce f32 of static shape");
    }
    out_index.push_back(i);
    numels.push_back(numel_of(d));
    dims.push_back(std::move(d));
  }
  if (out_index.empty()) return false;
  std::vector<GradBucket> buckets = grad_buckets(numels, options_);
  // Where each bucket is complete: the position of the last producer of its gradients.
  std::vector<size_t> ready(buckets.size(), 0);
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (int64_t p = buckets[b].param_begin; p < buckets[b].param_end; ++p) {
      const ValueId v = g.outputs()[out_index[static_cast<size_t>(p)]].value;
      ready[b] = std::max(ready[b], static_cast<size_t>(g.value(v).node));
    }
  }
  std::vector<size_t> order(buckets.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ready[a] < ready[b]; });

  // New nodes (appended, then put in place).
  const size_t old_nodes = g.nodes().size();
  std::vector<NodeId> start_of(buckets.size()), wait_of(buckets.size());
  std::vector<NamedValue> outputs = g.outputs();
  for (size_t k = 0; k < order.size(); ++k) {
    const GradBucket& b = buckets[order[k]];
    Attrs a{{"bucket", static_cast<int64_t>(k)},
            {"stage", int64_t{stage}},
            {"param_begin", b.param_begin},
            {"param_end", b.param_end},
            {"flat_begin", b.flat_begin},
            {"flat_end", b.flat_end},
            {"recv_begin", b.recv_begin},
            {"recv_count", b.recv_count},
            {"numel", b.numel()}};
    std::vector<ValueId> grads;
    std::vector<int64_t> flat_dims, ranks;
    for (int64_t p = b.param_begin; p < b.param_end; ++p) {
      grads.push_back(g.outputs()[out_index[static_cast<size_t>(p)]].value);
      const auto& d = dims[static_cast<size_t>(p)];
      flat_dims.insert(flat_dims.end(), d.begin(), d.end());
      ranks.push_back(static_cast<int64_t>(d.size()));
    }
    const std::string scope = "grad_sync.bucket" + std::to_string(k);
    const NodeId s =
        g.add_node(Op::grad_reduce_start, grads, a, {TypedShape{DType::f32, Shape{a.i("numel")}}},
                   scope, Phase::backward);
    Attrs wa = a;
    std::vector<TypedShape> wait_types;
    if (zero_shards(stage, ZeroSharded::gradients)) {
      wait_types.push_back(TypedShape{DType::f32, Shape{}});
    } else {
      wa.set("dims", flat_dims);
      wa.set("ranks", ranks);
      for (int64_t p = b.param_begin; p < b.param_end; ++p) {
        wait_types.push_back(g.type(grads[static_cast<size_t>(p - b.param_begin)]));
      }
    }
    const ValueId buffer = g.node(s).outputs[0];
    const NodeId w =
        g.add_node(Op::grad_reduce_wait, {buffer}, wa, wait_types, scope, Phase::backward);
    start_of[k] = s;
    wait_of[k] = w;
    if (zero_shards(stage, ZeroSharded::gradients)) {
      outputs.push_back({"grad_sync:" + std::to_string(k), g.node(w).outputs[0]});
    } else {
      for (int64_t p = b.param_begin; p < b.param_end; ++p) {
        outputs[out_index[static_cast<size_t>(p)]].value =
            g.node(w).outputs[static_cast<size_t>(p - b.param_begin)];
      }
    }
  }
  if (zero_shards(stage, ZeroSharded::gradients)) {
    std::vector<NamedValue> kept;
    for (NamedValue& o : outputs) {
      if (!reduced_here(o.name)) kept.push_back(std::move(o));
    }
    outputs = std::move(kept);
  }

  // The order: each start right after its bucket's last gradient; each wait right after its
  // start (no overlap) or before the start kMaxBucketsInFlight later, else at the end.
  std::vector<Node> nodes;
  nodes.reserve(g.nodes().size());
  size_t next = 0;  // next start, in `order`
  size_t waited = 0;
  const auto emit_wait = [&](size_t k) { nodes.push_back(g.node(wait_of[k])); };
  for (size_t i = 0; i < old_nodes; ++i) {
    nodes.push_back(g.node(static_cast<NodeId>(i)));
    while (next < order.size() && ready[order[next]] == i) {
      if (options_.zero.overlap_comm) {
        while (waited + kMaxBucketsInFlight <= next) emit_wait(waited++);
      }
      nodes.push_back(g.node(start_of[next]));
      if (!options_.zero.overlap_comm) emit_wait(waited++);
      ++next;
    }
  }
  LJ_CHECK_EQ(next, order.size());
  while (waited < order.size()) emit_wait(waited++);
  g.set_nodes(std::move(nodes));
  g.mutable_outputs() = std::move(outputs);
  if (zero_shards(stage, ZeroSharded::parameters))
    LJ_RETURN_IF_ERROR(place_param_gathers(g, options_, numels));
  return true;
}

}  // namespace lj
