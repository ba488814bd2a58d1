// ZeRO-3's parameter gathers (param_gather.h), placed in named steps: where each parameter is
// used, which ones keep their forward gather for backward, one gather per parameter and phase,
// the shard input in the parameters' place, where each gather starts, and the new node order.
#include "passes/collectives/param_gather.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "models/moe.h"

namespace lj {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

struct Use {
  size_t node = 0;
  size_t slot = 0;
};

struct Fetch {
  size_t param = 0;
  size_t first_use = 0, last_use = 0;
  std::vector<Use> uses;
  NodeId start = -1, wait = -1;
  int phase = 0;           // 0 forward, 1 backward
  bool on_demand = false;  // max_live_parameters leaves no room to prefetch it
};

// The graph as the pass found it: its parameters, where backward starts, and each parameter's
// place in the flat vector.
struct Layout {
  std::vector<ValueId> params;
  std::vector<int64_t> numels;
  std::vector<int64_t> begin;  // flat offset of each parameter, and the total last
  std::vector<int> param_of;   // by value id: its parameter index, -1 for any other value
  size_t old_nodes = 0;
  size_t bwd_start = 0;  // the first backward node (old_nodes when none)
  int phase_of(size_t node) const { return node >= bwd_start ? 1 : 0; }
};

StatusOr<Layout> read_layout(const Graph& g, const std::vector<int64_t>& numels,
                             bool skip_experts) {
  Layout l;
  for (ValueId p : g.params()) {
    if (!(skip_experts && is_expert_param(g.input_name(p)))) l.params.push_back(p);
  }
  l.numels = numels;
  if (l.params.size() != numels.size()) {
    return invalid_argument("param_gather: " + std::to_string(l.params.size()) + " parameters, " +
                            std::to_string(numels.size()) + " gradients");
  }
  l.begin.assign(numels.size() + 1, 0);
  for (size_t i = 0; i < numels.size(); ++i) {
    std::vector<int64_t> d;
    LJ_CHECK(g.type(l.params[i]).shape.eval(SymEnv(), &d) && numel_of(d) == numels[i]);
    l.begin[i + 1] = l.begin[i] + numels[i];
  }
  // Readers of each parameter, by phase (by position: remat's forward copies in the backward
  // region count as backward).
  l.old_nodes = g.nodes().size();
  l.bwd_start = l.old_nodes;
  for (size_t i = 0; i < l.old_nodes; ++i) {
    if (g.nodes()[i].phase == Phase::backward) {
      l.bwd_start = i;
      break;
    }
  }
  l.param_of.assign(g.values().size(), -1);
  for (size_t p = 0; p < l.params.size(); ++p)
    l.param_of[static_cast<size_t>(l.params[p])] = static_cast<int>(p);
  return l;
}

// Which parameters keep their forward gather for backward: those below the persistence
// threshold, and (DeepSpeed's stage3_max_reuse_distance) those whose first backward use comes
// within max_reuse_distance elements of parameters gathered after their last forward use.
std::vector<bool> kept_for_backward(const Graph& g, const Layout& l, const ZeroConfig& zero) {
  const size_t n = l.params.size();
  std::vector<size_t> first[2], last[2];
  for (int ph = 0; ph < 2; ++ph) {
    first[ph].assign(n, kNone);
    last[ph].assign(n, kNone);
  }
  for (size_t i = 0; i < l.old_nodes; ++i) {
    const int ph = l.phase_of(i);
    for (ValueId v : g.nodes()[i].inputs) {
      const int p = l.param_of[static_cast<size_t>(v)];
      if (p < 0) continue;
      const auto q = static_cast<size_t>(p);
      if (first[ph][q] == kNone) first[ph][q] = i;
      last[ph][q] = i;
    }
  }
  std::vector<bool> keep(n, false);
  for (size_t p = 0; p < n; ++p) {
    if (first[0][p] == kNone || first[1][p] == kNone) continue;
    if (l.numels[p] < zero.stage3_param_persistence_threshold) {
      keep[p] = true;
      continue;
    }
    // The gathers between: parameters whose gather (first use in a phase) falls after p's last
    // forward use and before p's first backward use.
    int64_t between = 0;
    for (size_t q = 0; q < n && between < zero.stage3_max_reuse_distance; ++q) {
      if (q == p) continue;
      for (int ph = 0; ph < 2; ++ph) {
        const size_t f = first[ph][q];
        if (f != kNone && f > last[0][p] && f < first[1][p]) between += l.numels[q];
      }
    }
    keep[p] = between < zero.stage3_max_reuse_distance;
  }
  return keep;
}

// One gather per parameter and phase, with the uses it serves, in order of first use.
struct Fetches {
  std::vector<Fetch> by_phase[2];
};

Fetches collect_fetches(const Graph& g, const Layout& l, const std::vector<bool>& keep) {
  Fetches out;
  std::vector<int> fetch_of[2];
  fetch_of[0].assign(l.params.size(), -1);
  fetch_of[1].assign(l.params.size(), -1);
  for (size_t i = 0; i < l.old_nodes; ++i) {
    const Node& n = g.nodes()[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int p = l.param_of[static_cast<size_t>(n.inputs[k])];
      if (p < 0) continue;
      int ph = l.phase_of(i);
      // A kept parameter's backward uses read its forward gather.
      if (ph == 1 && keep[static_cast<size_t>(p)] && fetch_of[0][static_cast<size_t>(p)] >= 0) {
        ph = 0;
      }
      int& f = fetch_of[ph][static_cast<size_t>(p)];
      if (f < 0) {
        f = static_cast<int>(out.by_phase[ph].size());
        Fetch nf;
        nf.param = static_cast<size_t>(p);
        nf.first_use = i;
        nf.phase = ph;
        out.by_phase[ph].push_back(nf);
      }
      Fetch& fe = out.by_phase[ph][static_cast<size_t>(f)];
      fe.uses.push_back({i, k});
      fe.last_use = i;
    }
  }
  return out;
}

// The shard input replaces the parameters as what the caller feeds; its node.
NodeId add_shard_input(Graph& g, const Layout& l, int64_t world) {
  const int64_t shard = (l.begin.back() + world - 1) / world;
  Attrs in_attrs{{"name", std::string("zero3.param_shard")},
                 {"role", static_cast<int64_t>(Role::state)},
                 {"dtype", DType::f32},
                 {"shape", Shape{shard}}};
  const NodeId shard_node = g.add_node(Op::input, {}, in_attrs,
                                       {TypedShape{DType::f32, Shape{shard}}}, "", Phase::forward);
  std::vector<ValueId>& ins = g.mutable_inputs();
  ins.erase(std::remove_if(ins.begin(), ins.end(),
                           [&](ValueId v) {
                             const auto k = static_cast<size_t>(v);
                             return k < l.param_of.size() && l.param_of[k] >= 0;
                           }),
            ins.end());
  return shard_node;
}

// Each fetch's start and wait nodes (appended; placed by reorder), its readers rewired to the
// gathered value.
void add_gathers(Graph& g, const Layout& l, ValueId shard_value, Fetches* fetches) {
  for (int ph = 0; ph < 2; ++ph) {
    for (Fetch& f : fetches->by_phase[ph]) {
      const ValueId pv = l.params[f.param];
      std::vector<int64_t> dims;
      LJ_CHECK(g.type(pv).shape.eval(SymEnv(), &dims));
      const int64_t n = l.numels[f.param];
      Attrs a{{"param", static_cast<int64_t>(f.param)},
              {"flat_begin", l.begin[f.param]},
              {"flat_end", l.begin[f.param + 1]},
              {"numel", n},
              {"dims", dims}};
      const std::string scope = "zero3." + g.input_name(pv) + (ph == 0 ? ".forward" : ".backward");
      const Phase phase = ph == 0 ? Phase::forward : Phase::backward;
      f.start = g.add_node(Op::param_gather_start, {shard_value}, a,
                           {TypedShape{DType::f32, Shape{n}}}, scope, phase);
      f.wait = g.add_node(Op::param_gather_wait, {g.node(f.start).outputs[0]}, a, {g.type(pv)},
                          scope, phase);
      const ValueId whole = g.node(f.wait).outputs[0];
      for (const Use& u : f.uses) g.mutable_nodes()[u.node].inputs[u.slot] = whole;
    }
  }
}

// Where each start goes: after the wait of the gather `d` places earlier, or where the phase
// starts.
struct StartPlaces {
  std::vector<std::vector<NodeId>> after_wait[2];  // by phase, by fetch
  std::vector<NodeId> at_phase_start[2];
};

// Elements of gathered parameters alive at node i (gathered at or before it, last used at or
// after it), or alive where a phase starts (`before`: gathered before node i, used from it on).
int64_t live_at(const Fetches& fetches, const Layout& l, size_t i, bool before) {
  int64_t n = 0;
  for (int ph = 0; ph < 2; ++ph) {
    for (const Fetch& f : fetches.by_phase[ph]) {
      if ((before ? f.first_use < i : f.first_use <= i) && f.last_use >= i) n += l.numels[f.param];
    }
  }
  return n;
}

// d the most gathers whose elements fit the prefetch size (at least 1), within the live bound.
void place_phase_starts(Fetches& fetches, const Layout& l, const ZeroConfig& zero, int ph,
                        StartPlaces* out) {
  std::vector<Fetch>& fs = fetches.by_phase[ph];
  const size_t phase_first = ph == 0 ? 0 : l.bwd_start;
  // Alive where gather k would start if the window began at j: after the wait of j - 1, or
  // at the phase's start.
  const auto live_if_from = [&](size_t j) {
    return j == 0 ? live_at(fetches, l, phase_first, /*before=*/true)
                  : live_at(fetches, l, fs[j - 1].first_use, false);
  };
  for (size_t k = 0; k < fs.size(); ++k) {
    int64_t window = l.numels[fs[k].param];
    size_t j = k;  // the earliest gather in the window ending at k
    // DeepSpeed's stage3_max_live_parameters: no prefetch past it (the gather its use needs
    // still runs, right before the use).
    if (live_if_from(j) + window > zero.stage3_max_live_parameters) {
      fs[k].on_demand = true;
      continue;
    }
    while (j > 0 && window + l.numels[fs[j - 1].param] <= zero.stage3_prefetch_bucket_size &&
           live_if_from(j - 1) + window + l.numels[fs[j - 1].param] <=
               zero.stage3_max_live_parameters) {
      window += l.numels[fs[j - 1].param];
      --j;
    }
    // Start k after the wait of j - 1 (so at most the window is gathered ahead), or at the
    // phase's start.
    if (j == 0) {
      out->at_phase_start[ph].push_back(fs[k].start);
    } else {
      out->after_wait[ph][j - 1].push_back(fs[k].start);
    }
  }
}

// Sorts each phase's fetches by first use and, with overlap, places their starts.
StartPlaces place_starts(Fetches& fetches, const Layout& l, const ZeroConfig& zero) {
  StartPlaces out;
  for (int ph = 0; ph < 2; ++ph) {
    std::vector<Fetch>& fs = fetches.by_phase[ph];
    std::stable_sort(fs.begin(), fs.end(),
                     [](const Fetch& a, const Fetch& b) { return a.first_use < b.first_use; });
    out.after_wait[ph].assign(fs.size(), {});
  }
  if (!zero.overlap_comm) return out;
  for (int ph = 0; ph < 2; ++ph) place_phase_starts(fetches, l, zero, ph, &out);
  return out;
}

// The new node order: the shard input first, then the old nodes with each phase's first starts
// before its first node, and each gather's wait (and the starts that follow it) before its
// first use.
std::vector<Node> reorder(const Graph& g, const Layout& l, NodeId shard_node,
                          const Fetches& fetches, const StartPlaces& places, bool overlap) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes().size());
  nodes.push_back(g.node(shard_node));
  size_t next[2] = {0, 0};
  bool phase_started[2] = {false, false};
  for (size_t i = 0; i < l.old_nodes; ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (n.op != Op::input) {
      for (int q = 0; q <= l.phase_of(i); ++q) {
        if (phase_started[q]) continue;
        phase_started[q] = true;
        for (NodeId s : places.at_phase_start[q]) nodes.push_back(g.node(s));
      }
      for (int q = 0; q < 2; ++q) {
        const std::vector<Fetch>& fs = fetches.by_phase[q];
        while (next[q] < fs.size() && fs[next[q]].first_use == i) {
          const Fetch& f = fs[next[q]];
          if (!overlap || f.on_demand) nodes.push_back(g.node(f.start));
          nodes.push_back(g.node(f.wait));
          for (NodeId s : places.after_wait[q][next[q]]) nodes.push_back(g.node(s));
          ++next[q];
        }
      }
    }
    nodes.push_back(n);
  }
  LJ_CHECK(next[0] == fetches.by_phase[0].size() && next[1] == fetches.by_phase[1].size());
  return nodes;
}

}  // namespace

Status place_param_gathers(Graph& g, const GradSyncOptions& o, const std::vector<int64_t>& numels) {
  LJ_ASSIGN_OR_RETURN(const Layout l, read_layout(g, numels, o.skip_experts));
  const std::vector<bool> keep = kept_for_backward(g, l, o.zero);
  Fetches fetches = collect_fetches(g, l, keep);
  const NodeId shard_node = add_shard_input(g, l, o.world_size);
  add_gathers(g, l, g.node(shard_node).outputs[0], &fetches);
  const StartPlaces places = place_starts(fetches, l, o.zero);
  g.set_nodes(reorder(g, l, shard_node, fetches, places, o.zero.overlap_comm));
  return ok_status();
}

}  // namespace lj
