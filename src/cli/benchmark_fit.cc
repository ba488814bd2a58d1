// The memory check of cli/benchmark_fit.h.
#include "cli/benchmark_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cli/report.h"
#include "core/log.h"
#include "core/units.h"
#include "models/config.h"
#include "plan/budget.h"
#include "plan/host_plan.h"

namespace lj::cli {
namespace {

// The ranks of a ZeRO-3 run, from `estimate` up, at which one rank's predicted peak (the dry run of
// its graph: its shard of the states, the gathers, its buffers) fits `budget`, one rank per host;
// 0 when none of a few tries does. The estimate shards the states and keeps the rest.
int64_t zero3_ranks_that_fit(const Resolved& r, double estimate, const MemoryBudget& budget) {
  ZeroConfig zero = r.dp.zero;
  zero.stage = 3;
  auto ranks = std::max<int64_t>(2, static_cast<int64_t>(estimate));
  for (int tries = 0; tries < 4; ++tries, ranks += std::max<int64_t>(1, ranks / 4)) {
    const auto run = prepare_host_run(r.model.config, r.micro_batch, r.seq_len, r.step.graph,
                                      HostParallel{static_cast<int>(ranks), zero, 0, 0});
    if (!run.ok()) return 0;
    // The same rule as check_memory_fits: the dry run's reserved bytes beside the process now.
    const double need = static_cast<double>(run->figures.bytes_reserved) +
                        static_cast<double>(process_peak_rss_bytes());
    if (fits(need, budget.bytes)) return ranks;
  }
  return 0;
}

// What would fit instead, for check_memory_fits' hint: a smaller preset, full recompute, ZeRO-3
// over enough ranks, smaller batches. `base`: the process's own bytes outside the step.
std::string what_would_fit(const Resolved& r, const GraphFigures& e, double base,
                           const MemoryBudget& budget) {
  const auto need_of = [&](const GraphFigures& f) {
    return static_cast<double>(f.bytes_reserved) + base;
  };
  std::string hint;
  for (const std::string& p : llama_preset_names()) {
    auto c = llama_preset(p);
    if (!c.ok() || c->family != r.model.config.family ||
        c->num_params() >= r.model.config.num_params()) {
      continue;
    }
    GraphOptions o = r.step.graph;  // the same recompute, where it fits the preset's layers
    if (!o.recompute.validate(c->num_hidden_layers).ok()) o.recompute = RecomputeConfig{};
    auto est = graph_figures(*c, r.micro_batch, std::min(r.seq_len, c->max_position_embeddings), o);
    if (est.ok() && fits(need_of(*est), budget.bytes)) {
      hint = "--model " + p + " fits (" + format_bytes(need_of(*est)) + ")";
    }
  }
  // Recomputing every layer keeps the least activation memory.
  GraphOptions full = r.step.graph;
  full.recompute = RecomputeConfig{RecomputePolicy::full, 1, RecomputeMethod::uniform};
  if (!(full.recompute == r.step.graph.recompute)) {
    auto est = graph_figures(r.model.config, r.micro_batch, r.seq_len, full);
    if (est.ok() && fits(need_of(*est), budget.bytes)) {
      hint = "--recompute full fits (" + format_bytes(need_of(*est)) + ")" +
             (hint.empty() ? "" : "; " + hint);
    }
  }
  const MemoryStats& s = e.stats;
  const auto states =
      static_cast<double>(s.at_peak(MemCategory::weights) + s.at_peak(MemCategory::grads) +
                          s.at_peak(MemCategory::optimizer));
  const double rest = need_of(e) - states;
  const double usable = usable_bytes(budget.bytes);
  if (rest < usable) {
    if (const int64_t ranks = zero3_ranks_that_fit(r, std::ceil(states / (usable - rest)), budget);
        ranks > 0) {
      hint += (hint.empty() ? "" : "; ") +
              fmt::format(
                  "ZeRO-3 over {} or more hosts would shard the {:.1f} GiB of model states enough "
                  "(mpirun -np {}, one rank per host, ljperf benchmark --model {}{}; ranks on one "
                  "host share its memory)",
                  ranks, states / static_cast<double>(kGiB), ranks, r.model.config.name,
                  r.dp.zero.shards(ZeroSharded::parameters) ? "" : " --zero 3");
    }
  }
  hint += (hint.empty() ? "" : "; ") +
          std::string("a smaller --batch-size or --seq-len lowers the activations");
  return hint;
}

}  // namespace

// Refuses, before anything is allocated, a run whose predicted memory (the dry run `e` of its
// joint graph) does not fit the host's default budget (plan/budget.h), and says what would fit.
Status check_memory_fits(const Resolved& r, const GraphFigures& e, const HostInfo& host,
                         int ranks_on_host) {
  const double base = static_cast<double>(process_peak_rss_bytes());  // binary, libraries, graph
  const double need = static_cast<double>(e.bytes_reserved) + base;
  // Ranks on one host share its memory: each gets its share (their allocations come after
  // every rank has passed this check, so each sees the same available memory).
  const auto avail = static_cast<double>(host.mem_available_bytes) / ranks_on_host;
  const MemoryBudget budget = default_budget(
      avail, ranks_on_host > 1
                 ? fmt::format("available memory / {} ranks on this host", ranks_on_host)
                 : "available memory");
  LJ_LOG(debug) << "predicted peak " << format_bytes(need) << " ("
                << format_bytes(static_cast<double>(e.bytes_peak)) << " in tensors), available "
                << format_bytes(avail);
  if (fits(need, budget.bytes)) return ok_status();
  const MemoryStats& s = e.stats;
  auto gib = [](int64_t b) {
    return fmt::format("{:.1f}", static_cast<double>(b) / static_cast<double>(kGiB));
  };
  std::string what = fmt::format(
      "{} needs {} for one training step at batch {} x seq {} (GiB: weights {}, grads {}, "
      "optimizer {}, activations "
      "up to {}) but this host has {} available{}",
      r.model.config.name, format_bytes(need), r.micro_batch, r.seq_len,
      gib(s.at_peak(MemCategory::weights)), gib(s.at_peak(MemCategory::grads)),
      gib(s.at_peak(MemCategory::optimizer)), gib(s.peak(MemCategory::activations)),
      format_bytes(avail),
      ranks_on_host > 1 ? fmt::format(" per rank ({} ranks share it)", ranks_on_host) : "");
  return resource_exhausted(what, what_would_fit(r, e, base, budget));
}

}  // namespace lj::cli
