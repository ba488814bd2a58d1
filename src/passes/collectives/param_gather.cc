#include "passes/collectives/param_gather.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace lj {
namespace {

struct Use {
  size_t node;
  size_t slot;
};

struct Fetch {
  size_t param = 0;
  size_t first_use = 0, last_use = 0;
  std::vector<Use> uses;
  NodeId start = -1, wait = -1;
  int phase = 0;           // 0 forward, 1 backward
  bool on_demand = false;  // max_live_parameters leaves no room to prefetch it
};

}  // namespace

Status place_param_gathers(Graph& g, const GradSyncOptions& o, const std::vector<int64_t>& numels) {
  const std::vector<ValueId> params = g.params();
  if (params.size() != numels.size()) {
    return invalid_argument("param_gather: " + std::to_string(params.size()) + " parameters, " +
                            std::to_string(numels.size()) + " gradients");
  }
  std::vector<int64_t> begin(numels.size() + 1, 0);
  for (size_t i = 0; i < numels.size(); ++i) {
    std::vector<int64_t> d;
    LJ_CHECK(g.type(params[i]).shape.eval(SymEnv(), &d) && numel_of(d) == numels[i]);
    begin[i + 1] = begin[i] + numels[i];
  }
  const int64_t world = o.world_size;
  const int64_t shard = (begin.back() + world - 1) / world;

  // Readers of each parameter, by phase (by position: remat's forward copies in the backward
  // region count as backward).
  const size_t old_nodes = g.nodes().size();
  size_t bwd_start = old_nodes;
  for (size_t i = 0; i < old_nodes; ++i) {
    if (g.nodes()[i].phase == Phase::backward) {
      bwd_start = i;
      break;
    }
  }
  std::vector<int> param_of(g.values().size(), -1);
  for (size_t p = 0; p < params.size(); ++p)
    param_of[static_cast<size_t>(params[p])] = static_cast<int>(p);

  // Which parameters keep their forward gather for backward: those below the persistence
  // threshold, and (DeepSpeed's stage3_max_reuse_distance) those whose first backward use comes
  // within max_reuse_distance elements of parameters gathered after their last forward use.
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> first[2], last[2];
  for (int ph = 0; ph < 2; ++ph) {
    first[ph].assign(params.size(), kNone);
    last[ph].assign(params.size(), kNone);
  }
  for (size_t i = 0; i < old_nodes; ++i) {
    const int ph = i >= bwd_start ? 1 : 0;
    for (ValueId v : g.nodes()[i].inputs) {
      const int p = param_of[static_cast<size_t>(v)];
      if (p < 0) continue;
      const auto q = static_cast<size_t>(p);
      if (first[ph][q] == kNone) first[ph][q] = i;
      last[ph][q] = i;
    }
  }
  std::vector<bool> keep(params.size(), false);
  for (size_t p = 0; p < params.size(); ++p) {
    if (first[0][p] == kNone || first[1][p] == kNone) continue;
    if (numels[p] < o.zero.stage3_param_persistence_threshold) {
      keep[p] = true;
      continue;
    }
    // The gathers between: parameters whose gather (first use in a phase) falls after p's last
    // forward use and before p's first backward use.
    int64_t between = 0;
    for (size_t q = 0; q < params.size() && between < o.zero.stage3_max_reuse_distance; ++q) {
      if (q == p) continue;
      for (int ph = 0; ph < 2; ++ph) {
        const size_t f = first[ph][q];
        if (f != kNone && f > last[0][p] && f < first[1][p]) between += numels[q];
      }
    }
    keep[p] = between < o.zero.stage3_max_reuse_distance;
  }

  std::vector<Fetch> fetches[2];
  std::vector<int> fetch_of[2];
  fetch_of[0].assign(params.size(), -1);
  fetch_of[1].assign(params.size(), -1);
  for (size_t i = 0; i < old_nodes; ++i) {
    const Node& n = g.nodes()[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int p = param_of[static_cast<size_t>(n.inputs[k])];
      if (p < 0) continue;
      int ph = i >= bwd_start ? 1 : 0;
      // A kept parameter's backward uses read its forward gather.
      if (ph == 1 && keep[static_cast<size_t>(p)] && fetch_of[0][static_cast<size_t>(p)] >= 0) {
        ph = 0;
      }
      int& f = fetch_of[ph][static_cast<size_t>(p)];
      if (f < 0) {
        f = static_cast<int>(fetches[ph].size());
        Fetch nf;
        nf.param = static_cast<size_t>(p);
        nf.first_use = i;
        nf.phase = ph;
        fetches[ph].push_back(nf);
      }
      Fetch& fe = fetches[ph][static_cast<size_t>(f)];
      fe.uses.push_back({i, k});
      fe.last_use = i;
    }
  }
  // Elements of gathered parameters alive at node i (gathered at or before it, last used at or
  // after it), and alive where a phase starts (gathered before node i, used from it on).
  const auto live_at = [&](size_t i, bool before) {
    int64_t n = 0;
    for (int ph = 0; ph < 2; ++ph) {
      for (const Fetch& f : fetches[ph]) {
        if ((before ? f.first_use < i : f.first_use <= i) && f.last_use >= i) n += numels[f.param];
      }
    }
    return n;
  };

  // The shard input replaces the parameters as what the caller feeds.
  Attrs in_attrs{{"name", std::string("zero3.param_shard")},
                 {"role", static_cast<int64_t>(Role::state)},
                 {"dtype", DType::f32},
                 {"shape", Shape{shard}}};
  const NodeId shard_node = g.add_node(Op::input, {}, in_attrs,
                                       {TypedShape{DType::f32, Shape{shard}}}, "", Phase::forward);
  const ValueId shard_value = g.node(shard_node).outputs[0];
  std::vector<ValueId>& ins = g.mutable_inputs();
  ins.erase(std::remove_if(ins.begin(), ins.end(),
                           [&](ValueId v) {
                             const auto k = static_cast<size_t>(v);
                             return k < param_of.size() && param_of[k] >= 0;
                           }),
            ins.end());

  // The gathers; readers rewired.
  for (int ph = 0; ph < 2; ++ph) {
    for (Fetch& f : fetches[ph]) {
      const ValueId pv = params[f.param];
      std::vector<int64_t> dims;
      LJ_CHECK(g.type(pv).shape.eval(SymEnv(), &dims));
      const int64_t n = numels[f.param];
      Attrs a{{"param", static_cast<int64_t>(f.param)},
              {"flat_begin", begin[f.param]},
              {"flat_end", begin[f.param + 1]},
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

  // Where each start goes: after the wait of the gather `d` places earlier (-1: where the phase
  // starts), d the most gathers whose elements fit the prefetch size (at least 1).
  std::vector<std::vector<NodeId>> starts_after_wait[2];
  std::vector<NodeId> phase_starts[2];
  for (int ph = 0; ph < 2; ++ph) {
    std::vector<Fetch>& fs = fetches[ph];
    std::stable_sort(fs.begin(), fs.end(),
                     [](const Fetch& a, const Fetch& b) { return a.first_use < b.first_use; });
    starts_after_wait[ph].assign(fs.size(), {});
    if (!o.zero.overlap_comm) continue;
    const size_t phase_first = ph == 0 ? 0 : bwd_start;
    // Alive where gather k would start if the window began at j: after the wait of j - 1, or
    // at the phase's start.
    const auto live_if_from = [&](size_t j) {
      return j == 0 ? live_at(phase_first, /*before=*/true) : live_at(fs[j - 1].first_use, false);
    };
    for (size_t k = 0; k < fs.size(); ++k) {
      int64_t window = numels[fs[k].param];
      size_t j = k;  // the earliest gather in the window ending at k
      // DeepSpeed's stage3_max_live_parameters: no prefetch past it (the gather its use needs
      // still runs, right before the use).
      if (live_if_from(j) + window > o.zero.stage3_max_live_parameters) {
        fs[k].on_demand = true;
        continue;
      }
      while (j > 0 && window + numels[fs[j - 1].param] <= o.zero.stage3_prefetch_bucket_size &&
             live_if_from(j - 1) + window + numels[fs[j - 1].param] <=
                 o.zero.stage3_max_live_parameters) {
        window += numels[fs[j - 1].param];
        --j;
      }
      // Start k after the wait of j - 1 (so at most the window is gathered ahead), or at the
      // phase's start.
      if (j == 0) {
        phase_starts[ph].push_back(fs[k].start);
      } else {
        starts_after_wait[ph][j - 1].push_back(fs[k].start);
      }
    }
  }

  std::vector<Node> nodes;
  nodes.reserve(g.nodes().size());
  nodes.push_back(g.node(shard_node));
  size_t next[2] = {0, 0};
  bool phase_started[2] = {false, false};
  for (size_t i = 0; i < old_nodes; ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (n.op != Op::input) {
      const int ph = i >= bwd_start ? 1 : 0;
      for (int q = 0; q <= ph; ++q) {
        if (phase_started[q]) continue;
        phase_started[q] = true;
        for (NodeId s : phase_starts[q]) nodes.push_back(g.node(s));
      }
      for (int q = 0; q < 2; ++q) {
        std::vector<Fetch>& fs = fetches[q];
        while (next[q] < fs.size() && fs[next[q]].first_use == i) {
          const Fetch& f = fs[next[q]];
          if (!o.zero.overlap_comm || f.on_demand) nodes.push_back(g.node(f.start));
          nodes.push_back(g.node(f.wait));
          for (NodeId s : starts_after_wait[q][next[q]]) nodes.push_back(g.node(s));
          ++next[q];
        }
      }
    }
    nodes.push_back(n);
  }
  LJ_CHECK(next[0] == fetches[0].size() && next[1] == fetches[1].size());
  g.set_nodes(std::move(nodes));
  return ok_status();
}

}  // namespace lj
