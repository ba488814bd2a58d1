// `ljperf calibrate`: --measure measures this host (GEMM and memory bandwidth micro-runs, the peak
// FLOP/s, the process baseline: probe/host_baseline.h); --comm, under mpirun, the MPI collectives
// between the ranks (probe/comm_rates.h); --results refits what the CPU memory
// model's causes leave (a residual, bytes per node) by least squares from benchmark result
// records (benchmark --out). Either writes the coefficients file that
// `ljperf plan`, benchmark and train read.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/dist_session.h"
#include "cli/flag_checks.h"
#include "cli/report.h"
#include "core/json_read.h"
#include "core/units.h"
#include "plan/memory_fit.h"
#include "plan/memory_model.h"
#include "probe/comm_rates.h"
#include "probe/host_baseline.h"
#include "probe/host_measure.h"
#include "probe/host_peak.h"
#include "probe/host_rates.h"
#include "runtime/host.h"
#include "runtime/peak_probe.h"

namespace lj::cli {
namespace {

struct CalibrateArgs {
  bool device = false;  // --measure
  std::vector<std::string> results;
  std::vector<std::string> check;
  std::string out;
  std::string model_file;
  int threads = 0;
  bool per_node_term = false;
  bool comm = false;  // --comm
};

// --comm: the MPI collectives between the ranks of this job (probe/comm_rates.h), measured by
// every rank and cached by rank 0 for the host time model.
Status run_calibrate_comm() {
  return DistSession::run(CommOptions{}, [](DistSession& dist) -> Status {
    if (!dist.distributed()) {
      return invalid_argument(
          "calibrate --comm measures the MPI collectives between ranks, and this is one process",
          "run it under the launcher with the ranks to measure: mpirun -np 2 ljperf calibrate "
          "--comm");
    }
    LJ_ASSIGN_OR_RETURN(CommRates r, measure_comm_rates(dist.comm()));
    if (dist.is_root()) cache_comm_rates(r);
    fmt::print("{}  comm cache              {}\n", describe_comm_rates(r), comm_rates_cache_path());
    return ok_status();
  });
}

StatusOr<std::vector<MemoryRecord>> read_records(const std::vector<std::string>& files) {
  std::vector<MemoryRecord> recs;
  for (const auto& path : files) {
    std::ifstream f(path);
    if (!f) return not_found("cannot read " + path, "give a file written by benchmark --out");
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
      ++n;
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line, nullptr, false);
      const std::string hint = "rerun the benchmark with this ljperf (benchmark --out)";
      const Json& features = json_member(json_member(j, "plan"), "features");
      const Json& rss = json_member(json_member(j, "summary"), "peak_rss_bytes");
      if (j.is_discarded() || features.is_null() || rss.is_null()) {
        return invalid_argument(fmt::format("{}:{}: not a benchmark record with plan features and "
                                            "peak_rss_bytes",
                                            path, n),
                                hint);
      }
      const JsonWhere at{fmt::format("{}:{}", path, n), "", hint};
      MemoryRecord r;
      LJ_ASSIGN_OR_RETURN(r.features,
                          json_read<std::vector<double>>(features, at / "plan" / "features"));
      LJ_ASSIGN_OR_RETURN(r.measured_bytes,
                          json_read<double>(rss, at / "summary" / "peak_rss_bytes"));
      recs.push_back(std::move(r));
    }
  }
  return recs;
}

Status run_calibrate(const CalibrateArgs& a) {
  if (a.comm) {
    if (a.device || !a.results.empty() || !a.check.empty()) {
      return invalid_argument(
          "calibrate --comm runs alone (under mpirun), not with --measure, "
          "--results or --check",
          "mpirun -np 2 ljperf calibrate --comm, then ljperf calibrate ...");
    }
    return run_calibrate_comm();
  }
  if (!a.device && a.results.empty() && a.check.empty()) {
    return invalid_argument("calibrate needs --measure, --results or --check",
                            "ljperf calibrate --measure, or ljperf calibrate --results runs.jsonl");
  }
  const std::string out = a.out.empty() ? default_coefficients_path() : a.out;
  LJ_ASSIGN_OR_RETURN(PredictorCoefficients m, load_coefficients(a.model_file));
  if (a.device) {
    // Before any tensor: the binary, its libraries and (after the first run) OpenMP's threads.
    LJ_ASSIGN_OR_RETURN(HostMeasurement h, measure_host(a.threads));
    m.host.cpu = host_info().cpu_model;
    m.host.threads = h.threads;
    m.host.gemm_flops = h.gemm_flops;
    m.host.mem_bandwidth = h.mem_bandwidth;
    fmt::print(
        "host: {} ({} threads)\n  GEMM (matmul kernel)    {:.1f} GFLOP/s\n  memory bandwidth "
        "        {:.1f} GB/s (elementwise add)\n",
        m.host.cpu, h.threads, h.gemm_flops / 1e9, h.mem_bandwidth / 1e9);
    // The peak MFU divides by: measured by the FMA probe, per dtype, and cached for this host.
    for (DType t : {DType::f32, DType::bf16}) {
      if (!peak_probe_supports(t)) continue;
      LJ_ASSIGN_OR_RETURN(HostPeak p, host_peak(t, h.threads, /*remeasure=*/true));
      const std::string nominal =
          p.nominal_flops > 0 ? fmt::format("{:.1f} GFLOP/s", p.nominal_flops / 1e9) : "none";
      fmt::print("  peak {:<18} {} ({}; nominal {})\n", dtype_name(t), p.describe(), p.isa,
                 nominal);
    }
    fmt::print("  peak cache              {}\n", host_peak_cache_path());
    // The time model's per-category rates (probe/host_rates.h): remeasured, cached.
    LJ_ASSIGN_OR_RETURN(HostRates rates, host_rates(h.threads, /*remeasure=*/true));
    fmt::print("{}", describe_host_rates(rates));
    fmt::print("  rates cache             {} ({:.1f} s)\n", host_rates_cache_path(),
               rates.probe_seconds);
    // The process baseline the memory model adds (probe/host_baseline.h): remeasured, cached.
    LJ_ASSIGN_OR_RETURN(HostBaseline b, host_baseline(h.threads, /*remeasure=*/true));
    fmt::print("  process baseline        {} (tiny preset in a child, {:.1f} s; cache {})\n",
               format_bytes(b.bytes), b.probe_seconds, host_baseline_cache_path());
  }
  if (!a.results.empty()) {
    LJ_ASSIGN_OR_RETURN(std::vector<MemoryRecord> recs, read_records(a.results));
    LJ_ASSIGN_OR_RETURN(MemoryFit fit, fit_cpu_memory(recs, m, a.per_node_term));
    m = fit.model;
    fmt::print(
        "fitted on {} records: rss = allocator blocks (resident) + measured process baseline + "
        "oneDNN GEMM buffers + residual {} + {:.1f} B/node x nodes{}\n",
        recs.size(), format_bytes(m.host.baseline_rss_bytes), m.cpu_memory.per_node_bytes,
        m.cpu_memory.gemm_pack_bytes > 0
            ? " (hosts without the GEMM buffer model: + " +
                  format_bytes(m.cpu_memory.gemm_pack_bytes) + " when oneDNN packs a GEMM)"
            : std::string());
    fmt::print("  relative error: median {:.2f}%, max {:.2f}%\n", 100 * fit.median_rel_error,
               100 * fit.max_rel_error);
  }
  if (!a.check.empty()) {
    // Predicted (this model) against measured peak RSS, one line per record.
    LJ_ASSIGN_OR_RETURN(std::vector<MemoryRecord> recs, read_records(a.check));
    std::vector<double> e;
    fmt::print("check: {:>12} {:>12} {:>8}\n", "predicted", "measured", "error");
    for (size_t i = 0; i < recs.size(); ++i) {
      const double p = predict_cpu_rss(recs[i].features, m);
      const double err = (p - recs[i].measured_bytes) / recs[i].measured_bytes;
      e.push_back(std::fabs(err));
      fmt::print("  {:>4} {:>12} {:>12} {:>+7.2f}%\n", i + 1, format_bytes(p),
                 format_bytes(recs[i].measured_bytes), 100 * err);
    }
    std::sort(e.begin(), e.end());
    fmt::print("check over {} records: median |error| {:.2f}%, max |error| {:.2f}%\n", e.size(),
               100 * e[e.size() / 2], 100 * e.back());
    if (!a.device && a.results.empty()) return ok_status();  // --check alone writes nothing
  }
  m.source = out;
  LJ_RETURN_IF_ERROR(save_coefficients(m, out));
  fmt::print("wrote {}\n", out);
  return ok_status();
}

}  // namespace

Command add_calibrate_command(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* sub = app.add_subcommand(
      "calibrate", "Measure this host, or refit the predictor coefficients from benchmark results");
  sub->footer(
      "Examples:\n  ljperf calibrate --measure\n  ljperf calibrate --results runs.jsonl "
      "--out predictor_coefficients.json\nThe file starts from --coefficients (else the file plan "
      "reads) "
      "and only the measured or fitted values change.");
  sub->add_flag("--measure", a->device,
                "Measure GEMM FLOP/s and memory bandwidth of this host (about a second)");
  add_renamed_flag(sub, "--device", "--measure", "--device names a device in other commands",
                   &a->device);
  sub->add_option("--results", a->results,
                  "benchmark --out .jsonl files: refit the CPU memory coefficients (least "
                  "squares on peak RSS)");
  sub->add_option("--check", a->check,
                  "benchmark --out .jsonl files: print predicted against measured peak RSS with "
                  "the (refitted) model; alone, writes nothing");
  sub->add_option("--out", a->out,
                  "Model file to write (default: " + default_coefficients_path() + ")");
  sub->add_option("--coefficients", a->model_file, "Predictor coefficients file to start from");
  add_renamed_option(sub, "--model-file", "--coefficients", "--model is the model", &a->model_file);
  sub->add_flag("--per-node-term", a->per_node_term,
                "With --results: also fit bytes per graph node (off: that coefficient is 0)");
  sub->add_option("--threads", a->threads, "Threads for --measure (0: all)")->capture_default_str();
  sub->add_flag("--comm", a->comm,
                "Under mpirun -np N: measure the MPI all-reduce, reduce-scatter and all-gather "
                "between the N ranks (64 KiB to 64 MiB) and cache them for `ljperf plan --np N` "
                "on this host (a few seconds)");
  return {sub, [a] { return run_calibrate(*a); }};
}

}  // namespace lj::cli
