// The schedule pass: candidate orders (current, sink, greedy) scored by the memory plan's peak.
#include "passes/schedule/schedule.h"

#include <algorithm>
#include <set>

#include "core/check.h"
#include "passes/memory_plan/memory_plan.h"

namespace lj {
namespace {

// What the candidates need to know about values: storage groups (a reshape shares its input's
// storage), which groups live through the whole run anyway, and each group's size.
struct Storage {
  std::vector<ValueId> root;     // per value: the value owning its storage
  std::vector<bool> long_lived;  // per root: a graph input or (aliased by) a graph output
  std::vector<int64_t> bytes;    // per root, under the nominal env
  std::vector<int> producer;     // per value: node index, -1 none
};

Storage analyze(const Graph& g, const SymEnv& env) {
  const size_t nv = g.values().size();
  Storage s;
  s.root.resize(nv);
  s.long_lived.assign(nv, false);
  s.bytes.assign(nv, 0);
  s.producer.assign(nv, -1);
  for (size_t k = 0; k < nv; ++k) s.root[k] = static_cast<ValueId>(k);
  std::vector<int64_t> dims;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    for (ValueId v : n.outputs) {
      const auto k = static_cast<size_t>(v);
      s.producer[k] = static_cast<int>(i);
      if (n.op == Op::input) {
        s.long_lived[k] = true;
      } else if (op_def(n.op).has(kAlias)) {
        s.root[k] = s.root[static_cast<size_t>(n.inputs[0])];
      } else if (g.type(v).shape.eval(env, &dims)) {
        s.bytes[k] = numel_of(dims) * dtype_size(g.type(v).dtype);
      }
    }
  }
  for (const auto& o : g.outputs())
    s.long_lived[static_cast<size_t>(s.root[static_cast<size_t>(o.value)])] = true;
  return s;
}

std::vector<int> sink_order(const Graph& g, const Storage& s) {
  const auto& nodes = g.nodes();
  const size_t nn = nodes.size();
  std::vector<bool> pinned_out(nn, false), has_consumer(nn, false);
  for (const auto& o : g.outputs()) {
    const int p = s.producer[static_cast<size_t>(o.value)];
    if (p >= 0) pinned_out[static_cast<size_t>(p)] = true;
  }
  for (const Node& n : nodes) {
    for (ValueId v : n.inputs) {
      const int p = s.producer[static_cast<size_t>(v)];
      if (p >= 0) has_consumer[static_cast<size_t>(p)] = true;
    }
  }
  // A node sinks when moving it later lengthens no lifetime: each input lives on anyway or is
  // made by another sunk node (which then moves along with it).
  std::vector<bool> sunk(nn, false);
  for (size_t i = 0; i < nn; ++i) {
    const Node& n = nodes[i];
    if (n.op == Op::input || pinned_out[i] || !has_consumer[i]) continue;
    bool ok = true;
    for (ValueId v : n.inputs) {
      const auto k = static_cast<size_t>(v);
      const int p = s.producer[k];
      ok = ok && (s.long_lived[static_cast<size_t>(s.root[k])] ||
                  (p >= 0 && sunk[static_cast<size_t>(p)]));
    }
    sunk[i] = ok;
  }
  std::vector<int> order;
  order.reserve(nn);
  std::vector<bool> emitted(nn, false);
  // Emits a sunk node after the sunk producers it reads (depth is bounded by chain length).
  auto emit = [&](auto&& self, int i) -> void {
    if (emitted[static_cast<size_t>(i)]) return;
    for (ValueId v : nodes[static_cast<size_t>(i)].inputs) {
      const int p = s.producer[static_cast<size_t>(v)];
      if (p >= 0 && sunk[static_cast<size_t>(p)]) self(self, p);
    }
    emitted[static_cast<size_t>(i)] = true;
    order.push_back(i);
  };
  for (size_t i = 0; i < nn; ++i) {
    if (!sunk[i]) emit(emit, static_cast<int>(i));
  }
  for (size_t i = 0; i < nn; ++i) emit(emit, static_cast<int>(i));  // sunk, never consumed
  return order;
}

std::vector<int> greedy_order(const Graph& g, const Storage& s) {
  const auto& nodes = g.nodes();
  const size_t nn = nodes.size();
  std::vector<int> waiting(nn, 0);               // unscheduled producers (with repeats)
  std::vector<std::vector<int>> consumers(nn);   // per node, with repeats
  std::vector<int> uses_left(s.root.size(), 0);  // per root: input edges still to run
  for (size_t i = 0; i < nn; ++i) {
    for (ValueId v : nodes[i].inputs) {
      const auto k = static_cast<size_t>(v);
      ++uses_left[static_cast<size_t>(s.root[k])];
      const int p = s.producer[k];
      if (p >= 0) {
        ++waiting[i];
        consumers[static_cast<size_t>(p)].push_back(static_cast<int>(i));
      }
    }
  }
  std::vector<int> order;
  order.reserve(nn);
  std::set<int> ready;
  auto schedule = [&](int i) {
    order.push_back(i);
    for (ValueId v : nodes[static_cast<size_t>(i)].inputs)
      --uses_left[static_cast<size_t>(s.root[static_cast<size_t>(v)])];
    for (int c : consumers[static_cast<size_t>(i)]) {
      if (--waiting[static_cast<size_t>(c)] == 0) ready.insert(c);
    }
  };
  for (size_t i = 0; i < nn; ++i) {
    if (waiting[i] == 0 && nodes[i].op != Op::input) ready.insert(static_cast<int>(i));
  }
  for (size_t i = 0; i < nn; ++i) {
    if (nodes[i].op == Op::input) schedule(static_cast<int>(i));
  }
  std::vector<std::pair<ValueId, int>> reads;  // root -> edges from this node
  while (!ready.empty()) {
    int best = -1;
    int64_t best_score = 0;
    for (int i : ready) {
      const Node& n = nodes[static_cast<size_t>(i)];
      int64_t score = 0;
      for (ValueId v : n.outputs) score -= s.bytes[static_cast<size_t>(v)];
      reads.clear();
      for (ValueId v : n.inputs) {
        const ValueId r = s.root[static_cast<size_t>(v)];
        auto it = std::find_if(reads.begin(), reads.end(), [&](auto& e) { return e.first == r; });
        if (it == reads.end()) {
          reads.emplace_back(r, 1);
        } else {
          ++it->second;
        }
      }
      for (const auto& [r, edges] : reads) {
        const auto k = static_cast<size_t>(r);
        if (!s.long_lived[k] && uses_left[k] == edges) score += s.bytes[k];
      }
      if (best < 0 || score > best_score) {
        best = i;
        best_score = score;
      }
    }
    ready.erase(best);
    schedule(best);
  }
  LJ_CHECK_EQ(order.size(), nn) << "the graph has a cycle";
  return order;
}

// env with every symbol of g it leaves unbound set to `value`.
SymEnv complete_env(const Graph& g, SymEnv env, int64_t value) {
  for (const Value& v : g.values()) {
    const Shape& sh = v.type.shape;
    for (int d = 0; d < sh.rank(); ++d) {
      for (char c : sh[d].syms()) {
        if (env.get(c) == 0) env.set(c, value);
      }
    }
  }
  return env;
}

}  // namespace

std::vector<int> schedule_order(const Graph& g, const SymEnv& env, ScheduleStrategy strategy) {
  const Storage s = analyze(g, complete_env(g, env, SchedulePass::kNominalSymbol));
  return strategy == ScheduleStrategy::sink ? sink_order(g, s) : greedy_order(g, s);
}

StatusOr<bool> SchedulePass::run(Graph& g) {
  // The plan's (peak live, arena) of an order under each scoring shape.
  std::vector<SymEnv> envs;
  for (int64_t v : kScoringSymbols) envs.push_back(complete_env(g, nominal_, v));
  auto score = [&](const Graph& graph) -> StatusOr<std::vector<std::pair<int64_t, int64_t>>> {
    std::vector<std::pair<int64_t, int64_t>> r;
    for (const SymEnv& env : envs) {
      LJ_ASSIGN_OR_RETURN(MemoryPlan p, plan_memory(graph, env));
      r.emplace_back(p.bytes_peak_live, p.bytes_arena);
    }
    return r;
  };
  // Better: no peak higher, and a peak lower or (peaks equal) a smaller total arena.
  auto better = [](const auto& c, const auto& best) {
    bool lower_peak = false;
    int64_t arena_c = 0, arena_best = 0;
    for (size_t k = 0; k < c.size(); ++k) {
      if (c[k].first > best[k].first) return false;
      lower_peak = lower_peak || c[k].first < best[k].first;
      arena_c += c[k].second;
      arena_best += best[k].second;
    }
    return lower_peak || arena_c < arena_best;
  };
  LJ_ASSIGN_OR_RETURN(auto best_score, score(g));
  std::vector<Node> best;
  for (ScheduleStrategy st : {ScheduleStrategy::sink, ScheduleStrategy::greedy}) {
    const std::vector<int> order = schedule_order(g, nominal_, st);
    bool same = true;
    for (size_t i = 0; i < order.size() && same; ++i) same = order[i] == static_cast<int>(i);
    if (same) continue;
    std::vector<Node> nodes;
    nodes.reserve(order.size());
    for (int i : order) nodes.push_back(g.nodes()[static_cast<size_t>(i)]);
    Graph candidate = g;
    candidate.set_nodes(nodes);
    LJ_ASSIGN_OR_RETURN(auto c, score(candidate));
    if (better(c, best_score)) {
      best_score = std::move(c);
      best = std::move(nodes);
    }
  }
  if (best.empty()) return false;
  g.set_nodes(std::move(best));
  return true;
}

}  // namespace lj
