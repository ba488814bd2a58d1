// The static memory plan: buffer assignment (alias, in place, graph outputs), best-fit offsets,
// liveness figures, the validity check and the compile-log summary.
#include "passes/memory_plan/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/check.h"
#include "core/units.h"

namespace lj {
namespace {

int64_t align_up(int64_t bytes) {
  return (std::max<int64_t>(bytes, 1) + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
}

// Free gaps of the arena, best fit. Gaps are coalesced on free; `top` is the arena's size.
class GapList {
 public:
  int64_t allocate(int64_t bytes) {
    auto best = gaps_.end();
    for (auto it = gaps_.begin(); it != gaps_.end(); ++it) {
      if (it->second >= bytes && (best == gaps_.end() || it->second < best->second)) best = it;
    }
    if (best != gaps_.end()) {
      const int64_t at = best->first;
      const int64_t left = best->second - bytes;
      gaps_.erase(best);
      if (left > 0) gaps_.emplace(at + bytes, left);
      return at;
    }
    // No gap holds it: grow the arena, starting inside a free gap at its end when there is one.
    int64_t at = top_;
    if (!gaps_.empty()) {
      auto last = std::prev(gaps_.end());
      if (last->first + last->second == top_) {
        at = last->first;
        gaps_.erase(last);
      }
    }
    top_ = at + bytes;
    return at;
  }
  void free(int64_t at, int64_t bytes) {
    auto next = gaps_.lower_bound(at);
    if (next != gaps_.end() && next->first == at + bytes) {
      bytes += next->second;
      next = gaps_.erase(next);
    }
    if (next != gaps_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        prev->second += bytes;
        return;
      }
    }
    gaps_.emplace(at, bytes);
  }
  int64_t top() const { return top_; }

 private:
  std::map<int64_t, int64_t> gaps_;  // offset -> size
  int64_t top_ = 0;
};

// Placement 1, an allocator replayed over the schedule: at each node, the buffers it creates
// take the best-fitting free gap, then the buffers it reads last are freed. Returns the arena.
int64_t place_in_node_order(const std::vector<PlanBuffer>& buffers, int num_nodes,
                            std::vector<int64_t>* offsets) {
  std::vector<std::vector<int32_t>> created(static_cast<size_t>(num_nodes) + 1),
      dying(static_cast<size_t>(num_nodes) + 1);
  for (size_t b = 0; b < buffers.size(); ++b) {
    created[static_cast<size_t>(buffers[b].first)].push_back(static_cast<int32_t>(b));
    dying[static_cast<size_t>(buffers[b].last)].push_back(static_cast<int32_t>(b));
  }
  offsets->assign(buffers.size(), -1);
  GapList arena;
  for (int i = 0; i < num_nodes; ++i) {
    for (int32_t b : created[static_cast<size_t>(i)])
      (*offsets)[static_cast<size_t>(b)] = arena.allocate(buffers[static_cast<size_t>(b)].bytes);
    for (int32_t b : dying[static_cast<size_t>(i)])
      arena.free((*offsets)[static_cast<size_t>(b)], buffers[static_cast<size_t>(b)].bytes);
  }
  return arena.top();
}

// Placement 2, offline (greedy by size): the largest buffers first, each at the best-fitting
// gap between the buffers already placed whose lifetimes overlap its own, or above them all.
// Knowing every lifetime up front avoids the holes the replay leaves when long-lived buffers
// (gradients) are made between short-lived ones. Returns the arena.
int64_t place_by_size(const std::vector<PlanBuffer>& buffers, std::vector<int64_t>* offsets) {
  std::vector<size_t> order(buffers.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return buffers[x].bytes > buffers[y].bytes; });
  offsets->assign(buffers.size(), -1);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of overlapping placed buffers
  int64_t top = 0;
  for (size_t b : order) {
    const PlanBuffer& buf = buffers[b];
    busy.clear();
    for (size_t p : placed) {
      const PlanBuffer& o = buffers[p];
      if (o.first <= buf.last && buf.first <= o.last)
        busy.emplace_back((*offsets)[p], (*offsets)[p] + o.bytes);
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = 0, end = 0;
    for (const auto& [lo, hi] : busy) {
      const int64_t gap = lo - end;
      if (gap >= buf.bytes && (best < 0 || gap < best_gap)) {
        best = end;
        best_gap = gap;
      }
      end = std::max(end, hi);
    }
    if (best < 0) best = end;
    (*offsets)[b] = best;
    top = std::max(top, best + buf.bytes);
    placed.push_back(b);
  }
  return top;
}

}  // namespace

int64_t MemoryPlan::offset(ValueId v) const {
  const int32_t b = buffer_of[static_cast<size_t>(v)];
  return b < 0 ? -1 : buffers[static_cast<size_t>(b)].offset;
}

bool MemoryPlan::is_output(ValueId v) const {
  const int32_t b = buffer_of[static_cast<size_t>(v)];
  return b >= 0 && buffers[static_cast<size_t>(b)].output;
}

std::vector<MemCategory> value_categories(const Graph& g) {
  const size_t nv = g.values().size();
  std::vector<MemCategory> cat(nv, MemCategory::temporaries);
  std::vector<bool> read_by_backward(nv, false), is_output(nv, false);
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.inputs) {
      if (n.phase != Phase::forward) read_by_backward[static_cast<size_t>(v)] = true;
    }
  }
  for (const auto& o : g.outputs()) is_output[static_cast<size_t>(o.value)] = true;
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.outputs) {
      const auto k = static_cast<size_t>(v);
      if (n.phase == Phase::forward && read_by_backward[k]) cat[k] = MemCategory::activations;
      if (n.phase == Phase::backward && is_output[k]) cat[k] = MemCategory::grads;
      if (n.phase == Phase::optimizer && is_output[k]) cat[k] = MemCategory::optimizer;
    }
  }
  return cat;
}

namespace {

// What buffer assignment reads of every value: its concrete dims and bytes (produced values),
// its last reader, and whether it is pinned.
struct ValueFacts {
  std::vector<std::vector<int64_t>> dims;
  std::vector<int64_t> bytes;
  std::vector<int> last_use;  // the last node reading it; -1 when none
  // A graph output or a value a graph output aliases: its buffer is never freed or reused.
  std::vector<bool> pinned;
};

StatusOr<ValueFacts> value_facts(const Graph& g, const SymEnv& env) {
  const auto& nodes = g.nodes();
  const size_t nv = g.values().size();
  ValueFacts f;
  // Concrete sizes and dims of every produced value.
  f.dims.resize(nv);
  f.bytes.assign(nv, 0);
  for (const Node& n : nodes) {
    for (ValueId v : n.outputs) {
      const TypedShape& t = g.type(v);
      const auto k = static_cast<size_t>(v);
      if (!t.shape.eval(env, &f.dims[k])) {
        return invalid_argument("memory plan: " + t.to_string() + " has a symbol " +
                                env.to_string() + " does not bind");
      }
      f.bytes[k] = numel_of(f.dims[k]) * dtype_size(t.dtype);
    }
  }
  // Last reader of each value; graph outputs live past the last node.
  f.last_use.assign(nv, -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].inputs) f.last_use[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  // Alias chains run forward, so a reverse sweep sees the output before the values it aliases.
  f.pinned.assign(nv, false);
  for (const auto& o : g.outputs()) f.pinned[static_cast<size_t>(o.value)] = true;
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    if (op_def(n.op).has(kAlias) && f.pinned[static_cast<size_t>(n.outputs[0])])
      f.pinned[static_cast<size_t>(n.inputs[0])] = true;
  }
  return f;
}

// Which value occupies a buffer from which node on (in place hands a buffer to a new value), for
// the per-category figures.
struct Segment {
  int start = 0;
  MemCategory category = MemCategory::temporaries;
};

// Buffer assignment in node order: an alias shares its input's buffer, an in-place op takes over
// a dying input's, anything else gets a new buffer. Fills plan->buffer_of and plan->buffers.
class BufferAssignment {
 public:
  BufferAssignment(const Graph& g, const ValueFacts& f, MemoryPlan* plan)
      : g_(g), f_(f), plan_(*plan) {}

  void run(bool inplace) {
    const auto& nodes = g_.nodes();
    for (size_t k = 0; k < nodes.size(); ++k) {
      const Node& n = nodes[k];
      const int i = static_cast<int>(k);
      if (n.op == Op::input) continue;
      const OpDef& def = op_def(n.op);
      if (def.has(kAlias)) {
        share_with_input(n);
        continue;
      }
      if (inplace && def.has(kInplace) && n.outputs.size() == 1 &&
          !f_.pinned[static_cast<size_t>(n.outputs[0])] && take_over_input(n, i))
        continue;
      for (ValueId v : n.outputs) new_buffer(v, i);
    }
  }

  const std::vector<std::vector<Segment>>& segments() const { return segments_; }

 private:
  void new_buffer(ValueId v, int i) {
    const auto k = static_cast<size_t>(v);
    PlanBuffer b;
    b.bytes = align_up(f_.bytes[k]);
    b.first = i;
    b.last = std::max(i, f_.last_use[k]);
    b.output = f_.pinned[k];
    plan_.buffer_of[k] = static_cast<int32_t>(plan_.buffers.size());
    plan_.buffers.push_back(b);
    segments_.push_back({{i, plan_.category[k]}});
    plan_.bytes_naive += b.bytes;
  }

  // An alias's output is its input's buffer, which then lives to the output's last reader.
  void share_with_input(const Node& n) {
    const auto in = static_cast<size_t>(n.inputs[0]);
    const auto out = static_cast<size_t>(n.outputs[0]);
    const int32_t b = plan_.buffer_of[in];
    plan_.buffer_of[out] = b;
    if (b < 0) return;
    PlanBuffer& buf = plan_.buffers[static_cast<size_t>(b)];
    buf.last = std::max(buf.last, f_.last_use[out]);
    ++plan_.num_alias;
  }

  // In place: the output takes the buffer of an input that dies here (every value in it has its
  // last read at node i), whose shape matches element for element, and that no other input of
  // the node reads. False when none qualifies.
  bool take_over_input(const Node& n, int i) {
    const ValueId out = n.outputs[0];
    const auto ko = static_cast<size_t>(out);
    for (const ValueId in : n.inputs) {
      const auto ki = static_cast<size_t>(in);
      const int32_t b = plan_.buffer_of[ki];
      if (b < 0) continue;
      PlanBuffer& buf = plan_.buffers[static_cast<size_t>(b)];
      if (buf.output || buf.last != i || f_.dims[ki] != f_.dims[ko] ||
          dtype_size(g_.type(in).dtype) != dtype_size(g_.type(out).dtype))
        continue;
      bool shared = false;
      for (ValueId w : n.inputs) {
        if (w != in && plan_.buffer_of[static_cast<size_t>(w)] == b) shared = true;
      }
      if (shared) continue;
      plan_.buffer_of[ko] = b;
      buf.last = std::max(i, f_.last_use[ko]);
      segments_[static_cast<size_t>(b)].push_back({i, plan_.category[ko]});
      plan_.bytes_naive += align_up(f_.bytes[ko]);
      ++plan_.num_inplace;
      return true;
    }
    return false;
  }

  const Graph& g_;
  const ValueFacts& f_;
  MemoryPlan& plan_;
  std::vector<std::vector<Segment>> segments_;  // per buffer
};

// Graph outputs live past the last node: their place is never freed.
void keep_outputs(int num_nodes, MemoryPlan* plan) {
  for (PlanBuffer& b : plan->buffers) {
    if (!b.output) continue;
    b.last = num_nodes;
    plan->bytes_outputs += b.bytes;
  }
}

// Offsets: both placements, the smaller arena kept (node order on ties).
void place_buffers(int num_nodes, MemoryPlan* plan) {
  std::vector<int64_t> in_order, by_size;
  const int64_t top_in_order = place_in_node_order(plan->buffers, num_nodes, &in_order);
  const int64_t top_by_size = place_by_size(plan->buffers, &by_size);
  const bool size_wins = top_by_size < top_in_order;
  plan->placement = size_wins ? "by size" : "in node order";
  plan->bytes_arena = size_wins ? top_by_size : top_in_order;
  for (size_t b = 0; b < plan->buffers.size(); ++b)
    plan->buffers[b].offset = size_wins ? by_size[b] : in_order[b];
}

// Live bytes per node and category: each arena buffer counts once, under its occupant's
// category, from its first to its last node. Sets the peak, its node and its categories.
void find_live_peak(int num_nodes, const std::vector<std::vector<Segment>>& segments,
                    MemoryPlan* plan) {
  std::vector<std::array<int64_t, kNumMemCategories>> delta(static_cast<size_t>(num_nodes) + 2);
  for (size_t b = 0; b < plan->buffers.size(); ++b) {
    const PlanBuffer& buf = plan->buffers[b];
    const auto& segs = segments[b];
    for (size_t s = 0; s < segs.size(); ++s) {
      const int end = s + 1 < segs.size() ? segs[s + 1].start - 1 : buf.last;
      const auto c = static_cast<size_t>(segs[s].category);
      delta[static_cast<size_t>(segs[s].start)][c] += buf.bytes;
      delta[static_cast<size_t>(end) + 1][c] -= buf.bytes;
    }
  }
  std::array<int64_t, kNumMemCategories> live{};
  for (int i = 0; i < num_nodes; ++i) {
    int64_t total = 0;
    for (size_t c = 0; c < live.size(); ++c) {
      live[c] += delta[static_cast<size_t>(i)][c];
      total += live[c];
    }
    if (total > plan->bytes_peak_live) {
      plan->bytes_peak_live = total;
      plan->peak_node = i;
      plan->bytes_at_peak = live;
    }
  }
}

}  // namespace

StatusOr<MemoryPlan> plan_memory(const Graph& g, const SymEnv& env, const PlanOptions& options) {
  const double t0 = now_seconds();
  const int num_nodes = static_cast<int>(g.nodes().size());
  MemoryPlan plan;
  plan.env = env;
  plan.category = value_categories(g);
  plan.buffer_of.assign(g.values().size(), -1);
  LJ_ASSIGN_OR_RETURN(const ValueFacts facts, value_facts(g, env));
  BufferAssignment assignment(g, facts, &plan);
  assignment.run(options.inplace);
  keep_outputs(num_nodes, &plan);
  place_buffers(num_nodes, &plan);
  find_live_peak(num_nodes, assignment.segments(), &plan);
  plan.plan_ms = (now_seconds() - t0) * 1e3;
  return plan;
}

Status check_plan(const Graph& g, const MemoryPlan& plan) {
  const auto& nodes = g.nodes();
  const size_t nv = g.values().size();
  if (plan.buffer_of.size() != nv) return internal_error("plan made for another graph");
  std::vector<int> pos(nv, -1), last_use(nv, -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].inputs) last_use[static_cast<size_t>(v)] = static_cast<int>(i);
    for (ValueId v : nodes[i].outputs) pos[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  auto name = [](ValueId v) { return "%" + std::to_string(v); };
  // Every value inside its buffer's lifetime; sharing only by alias or in place.
  for (size_t k = 0; k < nv; ++k) {
    const int32_t b = plan.buffer_of[k];
    if (b < 0) continue;
    const auto v = static_cast<ValueId>(k);
    const PlanBuffer& buf = plan.buffers[static_cast<size_t>(b)];
    if (pos[k] < buf.first || last_use[k] > buf.last)
      return internal_error(name(v) + " is used outside its buffer's lifetime");
    if (pos[k] == buf.first) continue;
    const Node& n = g.producer(v);
    const int i = pos[k];
    const auto& in = n.inputs;
    if (op_def(n.op).has(kAlias)) {
      if (plan.buffer_of[static_cast<size_t>(in[0])] != b)
        return internal_error(name(v) + " (reshape) is not in its input's buffer");
      continue;
    }
    if (!op_def(n.op).has(kInplace))
      return internal_error(name(v) + " shares a buffer but its op is not in place");
    // In place: an input of the node in the same buffer, and nothing stored in the buffer
    // earlier is read after this node.
    bool from_input = false;
    for (ValueId w : in) from_input = from_input || plan.buffer_of[static_cast<size_t>(w)] == b;
    if (!from_input) return internal_error(name(v) + " takes a buffer none of its inputs holds");
    for (size_t u = 0; u < nv; ++u) {
      if (plan.buffer_of[u] == b && pos[u] < i && last_use[u] > i)
        return internal_error(name(v) + " overwrites %" + std::to_string(u) +
                              ", which is read later");
    }
  }
  // Disjoint bytes for overlapping lifetimes.
  std::vector<size_t> arena;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const PlanBuffer& buf = plan.buffers[b];
    if (buf.offset < 0 || buf.offset % kPlanAlignment != 0 ||
        buf.offset + buf.bytes > plan.bytes_arena)
      return internal_error("buffer " + std::to_string(b) + " lies outside the arena");
    arena.push_back(b);
  }
  for (size_t x = 0; x < arena.size(); ++x) {
    const PlanBuffer& a = plan.buffers[arena[x]];
    for (size_t y = x + 1; y < arena.size(); ++y) {
      const PlanBuffer& c = plan.buffers[arena[y]];
      const bool live_together = a.first <= c.last && c.first <= a.last;
      const bool bytes_overlap = a.offset < c.offset + c.bytes && c.offset < a.offset + a.bytes;
      if (live_together && bytes_overlap) {
        return internal_error("buffers " + std::to_string(arena[x]) + " and " +
                              std::to_string(arena[y]) + " are live together at overlapping bytes");
      }
    }
  }
  return ok_status();
}

std::string memory_plan_summary(const MemoryPlan& plan) {
  auto mb = [](int64_t b) { return format_bytes(static_cast<double>(b)); };
  const auto arena_buffers = static_cast<int>(plan.buffers.size());
  char line[256];
  std::string s;
  std::snprintf(line, sizeof line,
                "memory plan (%s): %d buffers, %d in place, %d reshape aliases, placed %s, "
                "planned in %.1f ms\n",
                plan.env.to_string().c_str(), arena_buffers, plan.num_inplace, plan.num_alias,
                plan.placement, plan.plan_ms);
  s += line;
  std::snprintf(line, sizeof line, "memory plan: naive %s -> arena %s; peak live %s\n",
                mb(plan.bytes_naive).c_str(), mb(plan.bytes_arena).c_str(),
                mb(plan.bytes_peak_live).c_str());
  s += line;
  s += "memory plan: at peak:";
  const char* sep = " ";
  for (int c = 0; c < kNumMemCategories; ++c) {
    const int64_t b = plan.bytes_at_peak[static_cast<size_t>(c)];
    if (b == 0) continue;
    s += sep;
    s += mem_category_name(static_cast<MemCategory>(c));
    s += " " + mb(b);
    sep = ", ";
  }
  s += "\n";
  s += "memory plan: graph outputs (kept in the arena after the run): " + mb(plan.bytes_outputs) +
       "\n";
  return s;
}

}  // namespace lj
