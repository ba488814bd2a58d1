// What `ljperf ablation` measured and how it is shown: the configurations (one table), each
// run's figures as read from a benchmark result record (or a peer's JSON line), the medians and
// spreads across rounds, and the renderings: a Markdown table, results.json and an SVG chart.
// Pure: no process is started here (ablation_command.cc runs the children), so the unit tests
// feed fixed figures and read the outputs back.
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/svg_chart.h"
#include "core/status.h"

namespace lj::cli {

// One configuration of the ablation, in the order the rows are shown; each adds one optimization
// to the row before it (the seed image's "Base, +ACCL, +CompilerOpt, +CkptOpt").
struct AblationConfig {
  std::string name;               // "+compile"
  std::vector<std::string> args;  // what it adds to every `ljperf benchmark` child
  int min_world_size = 1;         // below it the row is n/a
  std::string what;               // one line for the table's notes
  // Several ranks: zero_optimization.overlap_comm in the DeepSpeed JSON the ablation writes for
  // this row (false: blocking collectives; true: bucket reductions overlapped with backward).
  bool overlap_comm = false;
};

// The configurations, given the ablation's --memory-limit ("" = benchmark's default budget).
std::vector<AblationConfig> ablation_configs(const std::string& memory_limit);

// The figures of one run (one configuration in one round, or one peer run).
struct AblationRun {
  std::string config;  // AblationConfig::name, or the peer's name
  int round = 0;       // 1-based
  double tokens_per_s = 0;
  double peak_rss_bytes = 0;            // the run's process peak RSS (VmHWM), max over ranks
  double predicted_peak_rss_bytes = 0;  // per rank; 0: none (peers)
  double step_s_p50 = 0;
  std::string recompute;  // what the run recomputed (ljperf only)
  // The run's shape, to check that every run measured the same thing.
  std::string model;
  int64_t micro_batch = 0, seq_len = 0, grad_accum = 0;
  int threads = 0;                // per rank
  std::string precision = "f32";  // config.precision of the record ("f32", "bf16", "f16")
  double flops_per_token = 0;     // torchtitan's 6N + 12·L·H·Q·T (0: unknown, peers)
  // Several ranks (tokens_per_s is then the sum over ranks): the time per step in gradient
  // collectives and the part of it the step waited for, each the mean over ranks.
  int world_size = 1;
  // The peak the run's own MFU divided by, where one process measured it (host.peak_flops of a
  // record whose source says "measured"); 0 otherwise (several ranks read a cached figure; peers).
  double measured_peak_flops = 0;
  double comm_s = 0, comm_exposed_s = 0;
  bool overlap_comm = false;
  double overlapped_share() const {
    return comm_s > 0 ? std::clamp(1.0 - comm_exposed_s / comm_s, 0.0, 1.0) : 0;
  }
};

// One `ljperf benchmark --out` record (a JSON line) as a run of `config` in `round`.
StatusOr<AblationRun> run_from_benchmark_record(const std::string& line, const std::string& config,
                                                int round);
// A peer's JSON lines (bench/peers/peer_train.py): {"peer": name, "tokens_per_s", "peak_rss_bytes",
// optional "round", "batch_size", "seq_len", "threads", "model"}. Blank lines are skipped;
// `source` names the file in errors.
StatusOr<std::vector<AblationRun>> runs_from_peer_lines(const std::string& text,
                                                        const std::string& source);

struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> v);  // v non-empty

// One row of the report.
struct AblationRow {
  std::string name;
  std::string flags;  // the benchmark flags it adds, as typed ("" for base and peers)
  bool peer = false;
  bool available = true;
  std::string unavailable_reason;  // why n/a
  std::vector<AblationRun> runs;
  Spread tokens_per_s, peak_rss_bytes;
  double predicted_peak_rss_bytes = 0;  // median; 0 when none
  double speedup_vs_base = 0;           // 0: not applicable
  double speedup_vs_previous = 0;       // against the row above that was measured
  double mfu = 0;                       // median tokens/s × FLOPs per token / peak
  std::string recompute;                // of the first run
  // Several ranks: medians over rounds of the runs' comm figures (AblationRun).
  Spread comm_exposed_s;
  double comm_s = 0, overlapped_share = 0;
  bool overlap_comm = false;  // of the first run
};

// The measured peak MFU divides by (probe/host_peak.h), as the report names it.
struct PeakFigure {
  double flops = 0;
  std::string describe;  // "540.3 GFLOP/s fp32, measured"
  double nominal_flops = 0;
  int threads = 0;
  std::string isa;
};

// `probed` (this command's probe, on `probed.threads` threads) or, where higher, the highest
// peak one of the one-process `runs` on as many threads measured for itself. A probe is a
// fraction of a second and a neighbour on the cores' other hardware threads can halve it
// (cli/mfu_peak.h); each benchmark run probes twice.
PeakFigure highest_measured_peak(const PeakFigure& probed, const std::vector<AblationRun>& runs);

struct AblationReport {
  std::string model;
  int64_t micro_batch = 0, seq_len = 0, grad_accum = 0;
  int threads = 0;
  int world_size = 1;
  int rounds = 0;
  double flops_per_token = 0;
  PeakFigure peak;
  std::vector<AblationRow> rows;  // the configurations in order, then the peers
  std::string ratio_baseline;     // the peer row the ratio column divides by ("" = no column)
};

// Groups the runs by configuration (in `configs`' order) and by peer (in order of appearance),
// computes medians, spreads, speed-ups and MFU. Checks that every run has the same model and
// shape (a peer's shape where it states one) and ran on `world_size` ranks; a configuration
// without runs is n/a, with the reason `min_world_size` gives or "not run".
StatusOr<AblationReport> summarize_ablation(const std::vector<AblationConfig>& configs,
                                            const std::vector<AblationRun>& runs,
                                            const std::vector<AblationRun>& peer_runs,
                                            int world_size, const PeakFigure& peak);

std::string format_ablation_markdown(const AblationReport& r);
nlohmann::ordered_json ablation_to_json(const AblationReport& r);
// The rounds of an earlier results.json (ljperf rows only; peers come from their own file).
StatusOr<std::vector<AblationRun>> runs_from_results_json(const std::string& text,
                                                          const std::string& source);
BarChart ablation_chart(const AblationReport& r);

// "1474" tokens/s as the table and the chart write it; "513.9 MiB" for bytes.
std::string format_tokens_per_s(double v);
std::string format_mib(double bytes);

}  // namespace lj::cli
