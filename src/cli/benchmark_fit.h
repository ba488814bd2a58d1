// `ljperf benchmark`'s memory check: before anything is allocated, the run's predicted peak (the
// dry run of its joint graph, plan/graph_figures.h) against the host's default budget
// (plan/budget.h); a run that cannot fit is refused with what would fit instead.
#pragma once

#include "cli/benchmark.h"
#include "core/status.h"
#include "plan/graph_figures.h"
#include "runtime/host.h"

namespace lj::cli {

// resource_exhausted, with a hint of what would fit (a smaller preset, full recompute, ZeRO-3
// over enough hosts, smaller batches), when `e`'s reserved bytes beside the process's own do not
// fit this rank's share of the available memory (`ranks_on_host` ranks share it).
Status check_memory_fits(const Resolved& r, const GraphFigures& e, const HostInfo& host,
                         int ranks_on_host);

}  // namespace lj::cli
