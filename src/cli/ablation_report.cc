// The ablation's figures and renderings; see ablation_report.h.
#include "cli/ablation_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/json_read.h"
#include "core/units.h"

namespace lj::cli {
namespace {

using Json = nlohmann::json;

// A number at `path` (dot-separated keys) in `j`; a message naming it when absent.
StatusOr<double> number_at(const Json& j, const std::string& path, const std::string& source) {
  const Json* v = &j;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!v->is_object() || !v->contains(key)) {
      return invalid_argument(source + " has no '" + path + "'",
                              "it must be a record of `ljperf benchmark --out` or of a peer");
    }
    v = &(*v)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const std::optional<double> x = json_number_if(*v);
  if (!x) return invalid_argument(source + ": '" + path + "' is not a number");
  return *x;
}

// The member `key` of `j` (at `at`): `fallback` when absent or null, an error naming it when it
// has another type.
template <class T>
StatusOr<T> optional_at(const Json& j, const char* key, const T& fallback, const JsonWhere& at) {
  return json_read_or<T>(json_member(j, key), fallback, at / key);
}

std::string speedup_text(double x) {
  return x > 0 ? fmt::format("{:.2f}×", x) : "—";
}

// The numbers of an array at `key` of `j` ("" when absent or not all numbers).
std::vector<double> numbers_at(const Json& j, const std::string& key) {
  std::vector<double> v;
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) return v;
  for (const Json& x : j[key]) {
    const std::optional<double> d = json_number_if(x);
    if (!d) return {};
    v.push_back(*d);
  }
  return v;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

std::string ms_text(double s) {
  return fmt::format("{:.1f} ms", 1e3 * s);
}

}  // namespace

std::vector<AblationConfig> ablation_configs(const std::string& memory_limit) {
  std::vector<std::string> ckpt = {"--compile", "--ckpt-opt"};
  if (!memory_limit.empty()) {
    ckpt.push_back("--memory-limit");
    ckpt.push_back(memory_limit);
  }
  return {
      {"base",
       {},
       1,
       "eager (one primitive op at a time, caching allocator), no recompute; several ranks: "
       "blocking gradient collectives (overlap_comm false)",
       false},
      // Blocking vs bucketed, overlapped collectives: the ablation's DeepSpeed JSON per row
      // (ablation_command.cc); one process has no collective to overlap.
      {"+comm",
       {},
       2,
       "bucket reductions started during backward, nonblocking (overlap_comm true, DeepSpeed's "
       "default reduce_bucket_size unless --deepspeed sets one)",
       true},
      {"+compile", {"--compile"}, 1, "fusion, generated kernels, static memory plan", true},
      {"+compile +ckpt-opt", ckpt, 1,
       "the planner picks the fastest recompute that fits the memory budget", true},
  };
}

PeakFigure highest_measured_peak(const PeakFigure& probed, const std::vector<AblationRun>& runs) {
  PeakFigure r = probed;
  double best = 0;
  for (const AblationRun& run : runs) {
    if (run.world_size == 1 && run.threads == probed.threads) {
      best = std::max(best, run.measured_peak_flops);
    }
  }
  if (best > probed.flops) {
    // A run probes the peak of its own precision (cli/mfu_peak.h: for bf16 the higher of the
    // bf16 dot-product and the f32 FMA peaks), so the figure is named for the runs' precision.
    const std::string& precision = runs.front().precision;
    r.flops = best;
    r.describe = fmt::format("{:.1f} GFLOP/s {}, measured, the highest of the runs' probes",
                             best / 1e9, precision == "f32" ? "fp32" : "for " + precision);
  }
  return r;
}

StatusOr<AblationRun> run_from_benchmark_record(const std::string& line, const std::string& config,
                                                int round) {
  const std::string source =
      "benchmark record of " + config + " (round " + std::to_string(round) + ")";
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(source + " is not JSON");
  AblationRun r;
  r.config = config;
  r.round = round;
  LJ_ASSIGN_OR_RETURN(r.tokens_per_s, number_at(j, "summary.tokens_per_s", source));
  LJ_ASSIGN_OR_RETURN(r.peak_rss_bytes, number_at(j, "summary.peak_rss_bytes", source));
  LJ_ASSIGN_OR_RETURN(r.predicted_peak_rss_bytes,
                      number_at(j, "plan.predicted_peak_rss_bytes", source));
  LJ_ASSIGN_OR_RETURN(r.step_s_p50, number_at(j, "summary.step_s_p50", source));
  LJ_ASSIGN_OR_RETURN(r.flops_per_token, number_at(j, "summary.flops_per_token", source));
  LJ_ASSIGN_OR_RETURN(double mb, number_at(j, "config.micro_batch", source));
  LJ_ASSIGN_OR_RETURN(double t, number_at(j, "config.seq_len", source));
  LJ_ASSIGN_OR_RETURN(double ga, number_at(j, "config.grad_accum", source));
  LJ_ASSIGN_OR_RETURN(double th, number_at(j, "config.threads", source));
  r.micro_batch = static_cast<int64_t>(mb);
  r.seq_len = static_cast<int64_t>(t);
  r.grad_accum = static_cast<int64_t>(ga);
  r.threads = static_cast<int>(th);
  const JsonWhere at{source};
  const Json& config_json = json_member(j, "config");
  LJ_ASSIGN_OR_RETURN(r.model, optional_at<std::string>(config_json, "model", "", at / "config"));
  LJ_ASSIGN_OR_RETURN(r.recompute,
                      optional_at<std::string>(config_json, "recompute", "", at / "config"));
  LJ_ASSIGN_OR_RETURN(r.precision,
                      optional_at<std::string>(config_json, "precision", "f32", at / "config"));
  LJ_ASSIGN_OR_RETURN(r.world_size, optional_at<int>(config_json, "world_size", 1, at / "config"));
  if (r.world_size == 1 && json_member(j, "host").is_object()) {
    const Json& host = json_member(j, "host");
    LJ_ASSIGN_OR_RETURN(const std::string src,
                        optional_at<std::string>(host, "peak_flops_source", "", at / "host"));
    if (src.find("measured") != std::string::npos) {
      LJ_ASSIGN_OR_RETURN(r.measured_peak_flops,
                          optional_at<double>(host, "peak_flops", 0.0, at / "host"));
    }
  }
  if (r.world_size > 1) {
    // Memory per rank: the largest rank's; comm: the mean over ranks (rank order arrays).
    const Json& sum = j["summary"];
    const std::vector<double> rss = numbers_at(sum, "process_peak_rss_bytes_per_rank");
    const std::vector<double> comm = numbers_at(sum, "comm_s_per_step_per_rank");
    const std::vector<double> exposed = numbers_at(sum, "comm_exposed_s_per_step_per_rank");
    const auto sized = [&](const std::vector<double>& v) {
      return static_cast<int>(v.size()) == r.world_size;
    };
    if (!sized(rss) || !sized(comm) || !sized(exposed)) {
      return invalid_argument(
          source + fmt::format(" has world_size {} but not one figure per rank in "
                               "summary.*_per_rank",
                               r.world_size),
          "it must be a record of `ljperf benchmark --out` run under mpirun");
    }
    r.peak_rss_bytes = *std::max_element(rss.begin(), rss.end());
    r.comm_s = mean_of(comm);
    r.comm_exposed_s = mean_of(exposed);
    LJ_ASSIGN_OR_RETURN(r.overlap_comm,
                        optional_at<bool>(sum, "overlap_comm", false, at / "summary"));
  }
  return r;
}

StatusOr<std::vector<AblationRun>> runs_from_peer_lines(const std::string& text,
                                                        const std::string& source) {
  std::vector<AblationRun> runs;
  std::map<std::string, int> rounds;
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(line_no);
    const Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return invalid_argument(where + " is not a JSON object",
                              "one JSON object per line, as bench/peers/peer_train.py prints");
    }
    const std::string* peer = json_string_if(json_member(j, "peer"));
    if (peer == nullptr || peer->empty()) {
      return invalid_argument(where + " has no \"peer\" name",
                              "one JSON object per line, as bench/peers/peer_train.py prints");
    }
    AblationRun r;
    r.config = *peer;
    LJ_ASSIGN_OR_RETURN(r.tokens_per_s, number_at(j, "tokens_per_s", where));
    LJ_ASSIGN_OR_RETURN(r.peak_rss_bytes, number_at(j, "peak_rss_bytes", where));
    if (!(r.tokens_per_s > 0) || !(r.peak_rss_bytes > 0)) {
      return invalid_argument(where + ": tokens_per_s and peak_rss_bytes must be positive");
    }
    const JsonWhere at{where};
    if (json_member(j, "round").is_number_integer()) {
      LJ_ASSIGN_OR_RETURN(r.round, json_read<int>(json_member(j, "round"), at / "round"));
    } else {
      r.round = ++rounds[r.config];
    }
    LJ_ASSIGN_OR_RETURN(r.model, optional_at<std::string>(j, "model", "", at));
    LJ_ASSIGN_OR_RETURN(r.micro_batch, optional_at<int64_t>(j, "batch_size", 0, at));
    LJ_ASSIGN_OR_RETURN(r.seq_len, optional_at<int64_t>(j, "seq_len", 0, at));
    LJ_ASSIGN_OR_RETURN(r.threads, optional_at<int>(j, "threads", 0, at));
    LJ_ASSIGN_OR_RETURN(r.step_s_p50, optional_at<double>(j, "step_s_p50", 0.0, at));
    // peer_train.py says "fp32" or "bf16" (autocast); the records say "f32" for the former.
    LJ_ASSIGN_OR_RETURN(r.precision, optional_at<std::string>(j, "precision", "f32", at));
    if (r.precision == "fp32") r.precision = "f32";
    runs.push_back(std::move(r));
  }
  if (runs.empty()) return invalid_argument(source + " holds no peer result");
  return runs;
}

Spread spread_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  Spread s;
  s.min = v.front();
  s.max = v.back();
  s.median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

StatusOr<AblationReport> summarize_ablation(const std::vector<AblationConfig>& configs,
                                            const std::vector<AblationRun>& runs,
                                            const std::vector<AblationRun>& peer_runs,
                                            int world_size, const PeakFigure& peak) {
  if (runs.empty()) return invalid_argument("the ablation has no run to report");
  AblationReport rep;
  const AblationRun& first = runs.front();
  rep.model = first.model;
  rep.micro_batch = first.micro_batch;
  rep.seq_len = first.seq_len;
  rep.grad_accum = first.grad_accum;
  rep.threads = first.threads;
  rep.flops_per_token = first.flops_per_token;
  rep.world_size = world_size;
  rep.peak = peak;
  for (const AblationRun& r : runs) {
    if (r.world_size != world_size) {
      return invalid_argument(
          fmt::format("{} round {} ran on {} rank{}, the ablation on {}", r.config, r.round,
                      r.world_size, r.world_size == 1 ? "" : "s", world_size),
          "merge only results of the same --np");
    }
    if (r.model != rep.model || r.micro_batch != rep.micro_batch || r.seq_len != rep.seq_len ||
        r.grad_accum != rep.grad_accum || r.threads != rep.threads) {
      return invalid_argument(
          fmt::format("the runs measured different things: {} B{} T{} x{} on {} threads ({} "
                      "round {}) vs {} B{} T{} x{} on {} threads",
                      r.model, r.micro_batch, r.seq_len, r.grad_accum, r.threads, r.config, r.round,
                      rep.model, rep.micro_batch, rep.seq_len, rep.grad_accum, rep.threads),
          "merge only results of the same model, shape and threads");
    }
    rep.rounds = std::max(rep.rounds, r.round);
  }
  for (const AblationRun& r : peer_runs) {
    if ((r.micro_batch != 0 && r.micro_batch != rep.micro_batch) ||
        (r.seq_len != 0 && r.seq_len != rep.seq_len) ||
        (r.threads != 0 && r.threads != rep.threads)) {
      return invalid_argument(
          fmt::format("peer '{}' measured batch {} x seq {} on {} threads, ljperf batch {} x "
                      "seq {} on {} threads",
                      r.config, r.micro_batch, r.seq_len, r.threads, rep.micro_batch, rep.seq_len,
                      rep.threads),
          "run the peer with the same --batch-size, --seq-len and --threads");
    }
  }
  const auto fill = [&](AblationRow& row) {
    std::vector<double> tps, rss, pred, comm, exposed, share;
    for (const AblationRun& r : row.runs) {
      tps.push_back(r.tokens_per_s);
      rss.push_back(r.peak_rss_bytes);
      if (r.predicted_peak_rss_bytes > 0) pred.push_back(r.predicted_peak_rss_bytes);
      comm.push_back(r.comm_s);
      exposed.push_back(r.comm_exposed_s);
      share.push_back(r.overlapped_share());
    }
    row.comm_s = spread_of(comm).median;
    row.comm_exposed_s = spread_of(exposed);
    row.overlapped_share = spread_of(share).median;
    row.overlap_comm = row.runs.front().overlap_comm;
    row.tokens_per_s = spread_of(tps);
    row.peak_rss_bytes = spread_of(rss);
    row.predicted_peak_rss_bytes = pred.empty() ? 0 : spread_of(pred).median;
    row.recompute = row.runs.front().recompute;
    if (peak.flops > 0 && rep.flops_per_token > 0) {
      row.mfu = row.tokens_per_s.median * rep.flops_per_token / peak.flops;
    }
  };
  for (const AblationConfig& c : configs) {
    AblationRow row;
    row.name = c.name;
    for (const std::string& a : c.args) row.flags += (row.flags.empty() ? "" : " ") + a;
    for (const AblationRun& r : runs) {
      if (r.config == c.name) row.runs.push_back(r);
    }
    if (row.runs.empty()) {
      row.available = false;
      row.unavailable_reason =
          world_size < c.min_world_size
              ? fmt::format("world size {}: one process has no collectives to bucket or overlap",
                            world_size)
              : "not run";
    } else {
      fill(row);
    }
    rep.rows.push_back(std::move(row));
  }
  for (const AblationRun& r : runs) {
    const bool known = std::any_of(configs.begin(), configs.end(),
                                   [&](const AblationConfig& c) { return c.name == r.config; });
    if (!known) return invalid_argument("unknown ablation configuration '" + r.config + "'");
  }
  for (const AblationRun& r : peer_runs) {
    auto it = std::find_if(rep.rows.begin(), rep.rows.end(), [&](const AblationRow& row) {
      return row.peer && row.name == r.config;
    });
    if (it == rep.rows.end()) {
      AblationRow row;
      row.name = r.config;
      row.peer = true;
      rep.rows.push_back(std::move(row));
      it = rep.rows.end() - 1;
    }
    it->runs.push_back(r);
  }
  for (AblationRow& row : rep.rows) {
    if (row.peer) fill(row);
  }
  // Speed-ups: over base, and over the row above that was measured (ljperf rows only).
  const AblationRow* base = rep.rows.front().available ? &rep.rows.front() : nullptr;
  const AblationRow* previous = nullptr;
  for (AblationRow& row : rep.rows) {
    if (!row.available) continue;
    if (base != nullptr) row.speedup_vs_base = row.tokens_per_s.median / base->tokens_per_s.median;
    if (!row.peer) {
      if (previous != nullptr) {
        row.speedup_vs_previous = row.tokens_per_s.median / previous->tokens_per_s.median;
      }
      previous = &row;
    }
  }
  for (const AblationRow& row : rep.rows) {
    if (row.peer) {
      rep.ratio_baseline = row.name;
      break;
    }
  }
  return rep;
}

std::string format_tokens_per_s(double v) {
  return fmt::format("{:.0f}", v);
}

std::string format_mib(double bytes) {
  return fmt::format("{:.1f} MiB", bytes / static_cast<double>(kMiB));
}

std::string format_ablation_markdown(const AblationReport& r) {
  std::string s;
  s += fmt::format(
      "**ljperf ablation**: model {}, micro-batch {} × seq {} × accum {}, {} threads, world size "
      "{}, {} round{} (interleaved; each run its own process)\n\n",
      r.model, r.micro_batch, r.seq_len, r.grad_accum, r.threads, r.world_size, r.rounds,
      r.rounds == 1 ? "" : "s");
  const bool ratio = !r.ratio_baseline.empty();
  const std::string mfu_head = fmt::format("MFU (of {})", r.peak.describe);
  const bool ranks = r.world_size > 1;
  s += "| configuration | flags | tokens/s (median) | min–max | × base | × previous | peak RSS " +
       std::string(ranks ? "per rank (measured, max over ranks, median)" : "(measured, median)") +
       " | peak RSS (predicted) | exposed comm / step | overlapped | recompute | " + mfu_head +
       " |" + (ratio ? " × " + r.ratio_baseline + " |" : "") + "\n";
  s += std::string("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|") + (ratio ? "--:|" : "") +
       "\n";
  const AblationRow* baseline = nullptr;
  for (const AblationRow& row : r.rows) {
    if (row.peer && row.name == r.ratio_baseline) baseline = &row;
  }
  for (const AblationRow& row : r.rows) {
    const std::string flags = row.flags.empty() ? "—" : "`" + row.flags + "`";
    if (!row.available) {
      s += fmt::format("| {} | {} | n/a | | | | | | | | | |{}\n", row.name, flags,
                       ratio ? " |" : "");
      continue;
    }
    const std::string range = fmt::format("{}–{}", format_tokens_per_s(row.tokens_per_s.min),
                                          format_tokens_per_s(row.tokens_per_s.max));
    // Comm figures: several ljperf ranks only.
    const bool comm = ranks && !row.peer;
    s += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2f}% |", row.name, flags,
        format_tokens_per_s(row.tokens_per_s.median), range, speedup_text(row.speedup_vs_base),
        speedup_text(row.speedup_vs_previous), format_mib(row.peak_rss_bytes.median),
        row.predicted_peak_rss_bytes > 0 ? format_mib(row.predicted_peak_rss_bytes) : "—",
        comm ? ms_text(row.comm_exposed_s.median) : "n/a",
        comm ? fmt::format("{:.0f}% of {}", 100.0 * row.overlapped_share, ms_text(row.comm_s))
             : "n/a",
        row.recompute.empty() ? "—" : row.recompute, 100.0 * row.mfu);
    if (ratio) {
      s += " " +
           speedup_text(baseline ? row.tokens_per_s.median / baseline->tokens_per_s.median : 0) +
           " |";
    }
    s += "\n";
  }
  s += "\n";
  for (const AblationRow& row : r.rows) {
    if (!row.available) s += fmt::format("- {}: n/a — {}.\n", row.name, row.unavailable_reason);
  }
  s += fmt::format(
      "- tokens/s: the median over rounds of each run's median step (warmup excluded){}; "
      "min–max: the spread across rounds. × previous: over the row above that was measured.\n",
      ranks ? fmt::format(", summed over the {} ranks", r.world_size) : "");
  if (ranks) {
    s += "- exposed comm / step: the time per step the ranks waited in gradient collectives "
         "(mean over ranks, median over rounds); overlapped: the share of the collectives' time "
         "hidden behind backward (1 − exposed ÷ total), of the total per step. base blocks "
         "(overlap_comm false); +comm and the rows below overlap (overlap_comm true).\n";
  } else {
    s += "- exposed comm / step, overlapped: n/a at world size 1 (no collectives); "
         "`ljperf ablation --np N` runs every row as an N-rank MPI job.\n";
  }
  s += fmt::format(
      "- MFU: {:.4g} GFLOP per token (6N + 12·L·H·Q·T, torchtitan's convention, recompute not "
      "counted) × tokens/s ÷ {} ({} on {} threads{}).\n",
      r.flops_per_token / 1e9, r.peak.describe, r.peak.isa.empty() ? "FMA probe" : r.peak.isa,
      r.peak.threads,
      // A bf16 probe has no nominal figure (probe/host_peak.h: f32 only).
      r.peak.nominal_flops > 0 ? fmt::format("; nominal {:.1f} GFLOP/s", r.peak.nominal_flops / 1e9)
                               : std::string());
  for (const AblationRow& row : r.rows) {
    if (row.mfu > 1.0) {
      s += fmt::format(
          "- **MFU above 100% ({}: {:.0f}%)**: the peak was measured while other processes held "
          "the cores; `ljperf calibrate --measure` on a quiet host remeasures it.\n",
          row.name, 100.0 * row.mfu);
      break;
    }
  }
  s += std::string("- peak RSS: each run's process peak resident set (VmHWM)") +
       (ranks ? ", the largest rank's" : "") +
       ", median over rounds; predicted: ljperf's memory predictor for that run" +
       (ranks ? " (one rank: its ZeRO shard and collective buffers)" : "") + ".\n";
  return s;
}

nlohmann::ordered_json ablation_to_json(const AblationReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["micro_batch"] = r.micro_batch;
  j["seq_len"] = r.seq_len;
  j["grad_accum"] = r.grad_accum;
  j["threads"] = r.threads;
  j["world_size"] = r.world_size;
  j["rounds"] = r.rounds;
  j["flops_per_token"] = r.flops_per_token;
  j["flops_convention"] = "6N+12LHQT (torchtitan)";
  j["peak"] = {{"flops", r.peak.flops},
               {"describe", r.peak.describe},
               {"nominal_flops", r.peak.nominal_flops},
               {"threads", r.peak.threads},
               {"isa", r.peak.isa}};
  j["ratio_baseline"] = r.ratio_baseline;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const AblationRow& row : r.rows) {
    nlohmann::ordered_json o;
    o["name"] = row.name;
    o["kind"] = row.peer ? "peer" : "ljperf";
    o["flags"] = row.flags;
    o["available"] = row.available;
    if (!row.available) {
      o["unavailable_reason"] = row.unavailable_reason;
      rows.push_back(o);
      continue;
    }
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    for (const AblationRun& run : row.runs) {
      nlohmann::ordered_json x = {{"round", run.round},
                                  {"tokens_per_s", run.tokens_per_s},
                                  {"peak_rss_bytes", run.peak_rss_bytes},
                                  {"predicted_peak_rss_bytes", run.predicted_peak_rss_bytes},
                                  {"step_s_p50", run.step_s_p50},
                                  {"recompute", run.recompute},
                                  {"model", run.model},
                                  {"micro_batch", run.micro_batch},
                                  {"seq_len", run.seq_len},
                                  {"grad_accum", run.grad_accum},
                                  {"threads", run.threads},
                                  {"flops_per_token", run.flops_per_token},
                                  {"world_size", run.world_size},
                                  {"precision", run.precision}};
      if (run.measured_peak_flops > 0) x["measured_peak_flops"] = run.measured_peak_flops;
      if (run.world_size > 1) {
        x["comm_s_per_step"] = run.comm_s;
        x["comm_exposed_s_per_step"] = run.comm_exposed_s;
        x["comm_overlapped_share"] = run.overlapped_share();
        x["overlap_comm"] = run.overlap_comm;
      }
      runs.push_back(x);
    }
    o["runs"] = runs;
    o["median"] = {{"tokens_per_s", row.tokens_per_s.median},
                   {"tokens_per_s_min", row.tokens_per_s.min},
                   {"tokens_per_s_max", row.tokens_per_s.max},
                   {"peak_rss_bytes", row.peak_rss_bytes.median},
                   {"peak_rss_bytes_min", row.peak_rss_bytes.min},
                   {"peak_rss_bytes_max", row.peak_rss_bytes.max},
                   {"predicted_peak_rss_bytes", row.predicted_peak_rss_bytes},
                   {"mfu", row.mfu},
                   {"speedup_vs_base", row.speedup_vs_base},
                   {"speedup_vs_previous", row.speedup_vs_previous}};
    // Several ljperf ranks: comm per step; null (n/a) otherwise.
    const bool comm = r.world_size > 1 && !row.peer;
    o["median"]["comm_s_per_step"] = comm ? nlohmann::ordered_json(row.comm_s) : nullptr;
    o["median"]["comm_exposed_s_per_step"] =
        comm ? nlohmann::ordered_json(row.comm_exposed_s.median) : nullptr;
    o["median"]["comm_exposed_s_per_step_min"] =
        comm ? nlohmann::ordered_json(row.comm_exposed_s.min) : nullptr;
    o["median"]["comm_exposed_s_per_step_max"] =
        comm ? nlohmann::ordered_json(row.comm_exposed_s.max) : nullptr;
    o["median"]["comm_overlapped_share"] =
        comm ? nlohmann::ordered_json(row.overlapped_share) : nullptr;
    if (comm) o["overlap_comm"] = row.overlap_comm;
    o["recompute"] = row.recompute;
    rows.push_back(o);
  }
  j["rows"] = rows;
  return j;
}

StatusOr<std::vector<AblationRun>> runs_from_results_json(const std::string& text,
                                                          const std::string& source) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rows") || !j["rows"].is_array()) {
    return invalid_argument(source + " is not an ablation results.json",
                            "give a results.json written by `ljperf ablation --out DIR`");
  }
  std::vector<AblationRun> runs;
  for (const Json& row : j["rows"]) {
    const std::string* kind = json_string_if(json_member(row, "kind"));
    if (kind == nullptr || *kind != "ljperf" ||
        !json_bool_if(json_member(row, "available")).value_or(false))
      continue;
    if (!json_member(row, "runs").is_array()) continue;
    for (const Json& x : row["runs"]) {
      AblationRun r;
      const std::string* name = json_string_if(json_member(row, "name"));
      r.config = name != nullptr ? *name : "";
      const std::string where = source + " (" + r.config + ")";
      const JsonWhere at{where};
      LJ_ASSIGN_OR_RETURN(r.tokens_per_s, number_at(x, "tokens_per_s", where));
      LJ_ASSIGN_OR_RETURN(r.peak_rss_bytes, number_at(x, "peak_rss_bytes", where));
      LJ_ASSIGN_OR_RETURN(r.round, optional_at<int>(x, "round", 1, at));
      LJ_ASSIGN_OR_RETURN(r.predicted_peak_rss_bytes,
                          optional_at<double>(x, "predicted_peak_rss_bytes", 0.0, at));
      LJ_ASSIGN_OR_RETURN(r.step_s_p50, optional_at<double>(x, "step_s_p50", 0.0, at));
      LJ_ASSIGN_OR_RETURN(r.recompute, optional_at<std::string>(x, "recompute", "", at));
      LJ_ASSIGN_OR_RETURN(r.model, optional_at<std::string>(x, "model", "", at));
      LJ_ASSIGN_OR_RETURN(r.micro_batch, optional_at<int64_t>(x, "micro_batch", 0, at));
      LJ_ASSIGN_OR_RETURN(r.seq_len, optional_at<int64_t>(x, "seq_len", 0, at));
      LJ_ASSIGN_OR_RETURN(r.grad_accum, optional_at<int64_t>(x, "grad_accum", 0, at));
      LJ_ASSIGN_OR_RETURN(r.threads, optional_at<int>(x, "threads", 0, at));
      LJ_ASSIGN_OR_RETURN(r.flops_per_token, optional_at<double>(x, "flops_per_token", 0.0, at));
      LJ_ASSIGN_OR_RETURN(r.world_size, optional_at<int>(x, "world_size", 1, at));
      LJ_ASSIGN_OR_RETURN(r.precision, optional_at<std::string>(x, "precision", "f32", at));
      LJ_ASSIGN_OR_RETURN(r.measured_peak_flops,
                          optional_at<double>(x, "measured_peak_flops", 0.0, at));
      LJ_ASSIGN_OR_RETURN(r.comm_s, optional_at<double>(x, "comm_s_per_step", 0.0, at));
      LJ_ASSIGN_OR_RETURN(r.comm_exposed_s,
                          optional_at<double>(x, "comm_exposed_s_per_step", 0.0, at));
      LJ_ASSIGN_OR_RETURN(r.overlap_comm, optional_at<bool>(x, "overlap_comm", false, at));
      runs.push_back(std::move(r));
    }
  }
  if (runs.empty()) return invalid_argument(source + " holds no ljperf run");
  return runs;
}

BarChart ablation_chart(const AblationReport& r) {
  BarChart c;
  const bool ranks = r.world_size > 1;
  c.title = ranks ? fmt::format("ljperf ablation: {} (batch {} × seq {}, {} ranks × {} thread{})",
                                r.model, r.micro_batch, r.seq_len, r.world_size, r.threads,
                                r.threads == 1 ? "" : "s")
                  : fmt::format("ljperf ablation: {} (batch {} × seq {}, {} threads)", r.model,
                                r.micro_batch, r.seq_len, r.threads);
  c.subtitle_lines.push_back(fmt::format(
      "median of {} interleaved round{}, error bars: min–max across rounds; each run its own "
      "process",
      r.rounds, r.rounds == 1 ? "" : "s"));
  std::string mfus;
  for (const AblationRow& row : r.rows) {
    if (row.available && row.mfu > 0) {
      mfus += fmt::format("{}{} {:.1f}%", mfus.empty() ? "" : ", ", row.name, 100.0 * row.mfu);
    }
  }
  c.subtitle_lines.push_back("MFU of " + r.peak.describe + ": " + mfus);
  if (ranks) {
    std::string comm;
    for (const AblationRow& row : r.rows) {
      if (!row.available || row.peer) continue;
      comm += fmt::format("{}{} {} ({:.0f}%)", comm.empty() ? "" : ", ", row.name,
                          ms_text(row.comm_exposed_s.median), 100.0 * row.overlapped_share);
    }
    c.subtitle_lines.push_back("exposed comm per step (overlapped share): " + comm);
  }
  ChartPanel tps{"Throughput", ranks ? "tokens/s (all ranks)" : "tokens/s", "", {}};
  ChartPanel mem{"Peak memory",
                 ranks ? "process peak RSS per rank, max (MiB)" : "process peak RSS (MiB)",
                 "",
                 {}};
  for (const AblationRow& row : r.rows) {
    // Two lines under a bar: "+compile +ckpt-opt" is wider than its slot.
    std::string label = row.name;
    const size_t sp = label.find(" +");
    if (sp != std::string::npos) label[sp] = '\n';
    if (row.peer) c.highlight_legend = "PyTorch peers (bench/peers)";
    ChartBar t;
    t.category = label;
    t.available = row.available;
    t.highlight = row.peer;
    ChartBar m = t;
    if (!row.available) {
      // The reason in a few words; the table's notes give it whole.
      t.unavailable_text = m.unavailable_text =
          row.unavailable_reason.rfind("world size", 0) == 0 ? "n/a (1 process)" : "n/a";
    } else {
      t.value = row.tokens_per_s.median;
      t.low = row.tokens_per_s.min;
      t.high = row.tokens_per_s.max;
      t.value_text = format_tokens_per_s(t.value);
      const double mib = static_cast<double>(kMiB);
      m.value = row.peak_rss_bytes.median / mib;
      m.low = row.peak_rss_bytes.min / mib;
      m.high = row.peak_rss_bytes.max / mib;
      m.value_text = fmt::format("{:.{}f}", m.value, m.value < 100 ? 1 : 0);
      if (row.predicted_peak_rss_bytes > 0) {
        m.marker = row.predicted_peak_rss_bytes / mib;
        mem.marker_legend = "predicted peak (ljperf's memory predictor)";
      }
    }
    tps.bars.push_back(t);
    mem.bars.push_back(m);
  }
  c.panels = {tps, mem};
  return c;
}

}  // namespace lj::cli
