// ljperf ablation's report (cli/ablation_report.h) and SVG chart (cli/svg_chart.h): fixed figures
// in, and the SVG text parsed back — bar heights through the axis' tick labels, error bar ends,
// predicted markers, the values written on the bars — must match results.json's medians.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>
#include "cli/ablation_report.h"
#include "cli/svg_chart.h"
#include "core/units.h"

namespace lj::cli {
namespace {

AblationRun run(const std::string& config, int round, double tps, double rss_mib, double pred_mib) {
  AblationRun r;
  r.config = config;
  r.round = round;
  r.tokens_per_s = tps;
  r.peak_rss_bytes = rss_mib * static_cast<double>(kMiB);
  r.predicted_peak_rss_bytes = pred_mib * static_cast<double>(kMiB);
  r.step_s_p50 = 1024.0 / tps;
  r.recompute = "none";
  r.model = "small";
  r.micro_batch = 4;
  r.seq_len = 256;
  r.grad_accum = 1;
  r.threads = 2;
  r.flops_per_token = 9.0e7;
  return r;
}

// Three rounds of base, +compile and +compile +ckpt-opt, as a world-size-1 ablation gives them.
std::vector<AblationRun> fixed_runs() {
  return {run("base", 1, 1374, 791.2, 700),
          run("+compile", 1, 1474, 513.9, 480),
          run("+compile +ckpt-opt", 1, 1460, 512.0, 478),
          run("base", 2, 1397, 790.0, 700),
          run("+compile", 2, 1606, 515.0, 480),
          run("+compile +ckpt-opt", 2, 1500, 511.0, 478),
          run("base", 3, 1547, 795.5, 700),
          run("+compile", 3, 1471, 514.2, 480),
          run("+compile +ckpt-opt", 3, 1520, 510.0, 478)};
}

PeakFigure fixed_peak() {
  return {540.3e9, "540.3 GFLOP/s fp32, measured", 332.8e9, 2, "avx512 fma"};
}

AblationReport fixed_report(const std::vector<AblationRun>& peers = {}) {
  auto rep = summarize_ablation(ablation_configs(""), fixed_runs(), peers, 1, fixed_peak());
  EXPECT_TRUE(rep.ok()) << rep.status().to_string();
  return *rep;
}

// The attributes of every element `<tag class="cls" ...>` in `svg`, in order.
std::vector<std::map<std::string, std::string>> elements(const std::string& svg,
                                                         const std::string& tag,
                                                         const std::string& cls) {
  std::vector<std::map<std::string, std::string>> out;
  const std::regex element("<" + tag + " class=\"" + cls + "\"([^>]*)>");
  const std::regex attr(R"re(([a-z0-9-]+)="([^"]*)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), element);
       it != std::sregex_iterator(); ++it) {
    std::map<std::string, std::string> a;
    const std::string attrs = (*it)[1];
    for (auto jt = std::sregex_iterator(attrs.begin(), attrs.end(), attr);
         jt != std::sregex_iterator(); ++jt) {
      a[(*jt)[1]] = (*jt)[2];
    }
    // The text content, for <text>.
    const size_t end = static_cast<size_t>(it->position() + it->length());
    a["#text"] = svg.substr(end, svg.find('<', end) - end);
    out.push_back(a);
  }
  return out;
}

double num(const std::map<std::string, std::string>& a, const std::string& key) {
  auto it = a.find(key);
  EXPECT_NE(it, a.end()) << "no attribute " << key;
  return it == a.end() ? NAN : std::stod(it->second);
}

// The value at pixel row `y` of panel `panel`, from two of its tick labels (a linear axis).
struct AxisMap {
  double y0 = 0, v0 = 0, y1 = 0, v1 = 0;
  double value_at(double y) const { return v0 + (y - y0) * (v1 - v0) / (y1 - y0); }
};
AxisMap axis_of(const std::string& svg, const std::string& panel) {
  std::vector<std::map<std::string, std::string>> ticks;
  for (auto& t : elements(svg, "text", "tick")) {
    if (t["data-panel"] == panel) ticks.push_back(t);
  }
  EXPECT_GE(ticks.size(), 3u);
  AxisMap m;
  m.y0 = num(ticks.front(), "y") - kTickTextDy;
  m.v0 = std::stod(ticks.front()["#text"]);
  m.y1 = num(ticks.back(), "y") - kTickTextDy;
  m.v1 = std::stod(ticks.back()["#text"]);
  return m;
}

TEST(AblationReport, MediansSpreadsSpeedupsAndMfu) {
  const AblationReport rep = fixed_report();
  ASSERT_EQ(rep.rows.size(), 4u);
  EXPECT_EQ(rep.rounds, 3);
  const AblationRow& base = rep.rows[0];
  EXPECT_EQ(base.tokens_per_s.median, 1397);
  EXPECT_EQ(base.tokens_per_s.min, 1374);
  EXPECT_EQ(base.tokens_per_s.max, 1547);
  EXPECT_FALSE(rep.rows[1].available);  // +comm at world size 1
  EXPECT_NE(rep.rows[1].unavailable_reason.find("world size 1"), std::string::npos);
  const AblationRow& compile = rep.rows[2];
  EXPECT_EQ(compile.tokens_per_s.median, 1474);
  // Exact: a quotient of two of the fixed figures, computed the same way.
  EXPECT_DOUBLE_EQ(compile.speedup_vs_base, 1474.0 / 1397.0);
  EXPECT_DOUBLE_EQ(compile.speedup_vs_previous, 1474.0 / 1397.0);  // +comm is skipped
  EXPECT_DOUBLE_EQ(rep.rows[3].speedup_vs_previous, 1500.0 / 1474.0);
  EXPECT_DOUBLE_EQ(compile.mfu, 1474 * 9.0e7 / 540.3e9);
  EXPECT_DOUBLE_EQ(compile.peak_rss_bytes.median, 514.2 * static_cast<double>(kMiB));
}

TEST(AblationReport, MarkdownNamesTheDenominatorAndTheNaReason) {
  const std::string md = format_ablation_markdown(fixed_report());
  EXPECT_NE(md.find("MFU (of 540.3 GFLOP/s fp32, measured)"), std::string::npos) << md;
  EXPECT_NE(md.find("| base | — | 1397 | 1374–1547 | 1.00× | — | 791.2 MiB | 700.0 MiB"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| +comm | — | n/a |"), std::string::npos) << md;
  EXPECT_NE(md.find("+comm: n/a — world size 1"), std::string::npos) << md;
  EXPECT_NE(md.find("| +compile | `--compile` | 1474 | 1471–1606 | 1.06× | 1.06× |"),
            std::string::npos)
      << md;
}

// A 2-rank `ljperf benchmark --output` record, as benchmark_report.cc writes it (the fields the
// ablation reads).
std::string two_rank_record(bool overlap, double exposed0, double exposed1) {
  nlohmann::json j;
  j["config"] = {{"model", "tiny"}, {"micro_batch", 2}, {"seq_len", 64},      {"grad_accum", 1},
                 {"threads", 1},    {"world_size", 2},  {"recompute", "none"}};
  j["summary"] = {{"tokens_per_s", 3000.0},
                  {"peak_rss_bytes", 100.0 * kMiB},  // rank 0's
                  {"step_s_p50", 0.05},
                  {"flops_per_token", 1.0e7},
                  {"tokens_per_s_per_rank", {1400.0, 1600.0}},
                  {"process_peak_rss_bytes_per_rank", {100.0 * kMiB, 120.0 * kMiB}},
                  {"comm_s_per_step", 0.010},
                  {"comm_s_per_step_per_rank", {0.010, 0.014}},
                  {"comm_exposed_s_per_step", exposed0},
                  {"comm_exposed_s_per_step_per_rank", {exposed0, exposed1}},
                  {"overlap_comm", overlap}};
  j["plan"] = {{"predicted_peak_rss_bytes", 110.0 * kMiB}};
  return j.dump();
}

// Two rounds of every configuration on 2 ranks: base blocks (all comm exposed), the others
// overlap (a quarter of it exposed).
std::vector<AblationRun> two_rank_runs() {
  std::vector<AblationRun> runs;
  for (int round = 1; round <= 2; ++round) {
    for (const AblationConfig& c : ablation_configs("")) {
      const bool overlap = c.overlap_comm;
      auto r = run_from_benchmark_record(
          overlap ? two_rank_record(true, 0.002, 0.004) : two_rank_record(false, 0.010, 0.014),
          c.name, round);
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      r->tokens_per_s += 100.0 * round + (overlap ? 500 : 0);
      runs.push_back(*r);
    }
  }
  return runs;
}

TEST(AblationReport, TwoRankRecordTakesTheLargestRankAndTheMeanComm) {
  auto r = run_from_benchmark_record(two_rank_record(true, 0.002, 0.004), "+comm", 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->world_size, 2);
  EXPECT_EQ(r->tokens_per_s, 3000.0);          // benchmark's sum over ranks
  EXPECT_EQ(r->peak_rss_bytes, 120.0 * kMiB);  // rank 1's, not rank 0's 100 MiB
  EXPECT_DOUBLE_EQ(r->comm_s, 0.012);
  EXPECT_DOUBLE_EQ(r->comm_exposed_s, 0.003);
  EXPECT_DOUBLE_EQ(r->overlapped_share(), 0.75);
  EXPECT_TRUE(r->overlap_comm);
  // One figure per rank or a clear error.
  nlohmann::json bad = nlohmann::json::parse(two_rank_record(true, 0.002, 0.004));
  bad["summary"]["comm_s_per_step_per_rank"] = {0.01};
  auto e = run_from_benchmark_record(bad.dump(), "+comm", 1);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("one figure per rank"), std::string::npos)
      << e.status().message();
}

TEST(AblationReport, TheRunsOwnMeasuredPeaksRaiseALowProbe) {
  // A one-process record whose benchmark measured its peak; several ranks read a cached one.
  nlohmann::json one = nlohmann::json::parse(two_rank_record(false, 0.01, 0.01));
  one["config"]["world_size"] = 1;
  one["config"]["threads"] = 2;
  one["host"] = {{"peak_flops", 231.0e9},
                 {"peak_flops_source",
                  "231.0 GFLOP/s fp32, measured; the higher of the probes before and after the "
                  "steps"}};
  auto r = run_from_benchmark_record(one.dump(), "+compile", 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->measured_peak_flops, 231.0e9);
  one["host"]["peak_flops_source"] = "166.2 GFLOP/s fp32 nominal (assumed)";
  EXPECT_DOUBLE_EQ(run_from_benchmark_record(one.dump(), "+compile", 1)->measured_peak_flops, 0);

  // Session 10: one probe read 117.5 GFLOP/s on 2 cores where the runs measured 227-235.
  const PeakFigure low{117.5e9, "117.5 GFLOP/s fp32, measured", 166.2e9, 2, "avx512 fma"};
  std::vector<AblationRun> runs = fixed_runs();
  runs[0].measured_peak_flops = 226.6e9;
  runs[4].measured_peak_flops = 231.0e9;
  const PeakFigure p = highest_measured_peak(low, runs);
  EXPECT_DOUBLE_EQ(p.flops, 231.0e9);
  EXPECT_EQ(p.describe, "231.0 GFLOP/s fp32, measured, the highest of the runs' probes");
  EXPECT_EQ(p.threads, 2);
  // A higher probe stands; runs on other thread counts or of several ranks do not count.
  const PeakFigure high{240.0e9, "240.0 GFLOP/s fp32, measured", 166.2e9, 2, "avx512 fma"};
  EXPECT_EQ(highest_measured_peak(high, runs).describe, high.describe);
  for (AblationRun& run : runs) run.threads = 1;
  EXPECT_DOUBLE_EQ(highest_measured_peak(low, runs).flops, 117.5e9);
  for (AblationRun& run : runs) {
    run.threads = 2;
    run.world_size = 2;
  }
  EXPECT_DOUBLE_EQ(highest_measured_peak(low, runs).flops, 117.5e9);
}

TEST(AblationReport, Bf16RunsNameTheirOwnPeak) {
  // Session 20's bf16 tables read "MFU (of 469.7 GFLOP/s fp32 ...)": the runs' bf16 probes,
  // named fp32.
  nlohmann::json one = nlohmann::json::parse(two_rank_record(false, 0.01, 0.01));
  one["config"]["world_size"] = 1;
  one["config"]["threads"] = 2;
  one["config"]["precision"] = "bf16";
  one["host"] = {{"peak_flops", 469.7e9},
                 {"peak_flops_source", "469.7 GFLOP/s bf16, measured; the higher of the probes"}};
  auto r = run_from_benchmark_record(one.dump(), "+compile", 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->precision, "bf16");
  const PeakFigure low{233.6e9, "233.6 GFLOP/s fp32, measured", 166.2e9, 2, "avx512 fma"};
  const PeakFigure p = highest_measured_peak(low, {*r});
  EXPECT_DOUBLE_EQ(p.flops, 469.7e9);
  EXPECT_EQ(p.describe, "469.7 GFLOP/s for bf16, measured, the highest of the runs' probes");
  // A record without the key is f32 (records before the key existed).
  one["config"].erase("precision");
  EXPECT_EQ(run_from_benchmark_record(one.dump(), "+compile", 1)->precision, "f32");
}

TEST(AblationReport, TwoRanksMeasureCommAndShowIt) {
  auto rep = summarize_ablation(ablation_configs(""), two_rank_runs(), {}, 2, fixed_peak());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  ASSERT_EQ(rep->rows.size(), 4u);
  for (const AblationRow& row : rep->rows) EXPECT_TRUE(row.available) << row.name;
  const AblationRow& base = rep->rows[0];
  const AblationRow& comm = rep->rows[1];
  EXPECT_FALSE(base.overlap_comm);
  EXPECT_TRUE(comm.overlap_comm);
  EXPECT_DOUBLE_EQ(base.overlapped_share, 0.0);
  EXPECT_DOUBLE_EQ(comm.overlapped_share, 0.75);
  EXPECT_DOUBLE_EQ(comm.comm_exposed_s.median, 0.003);
  EXPECT_DOUBLE_EQ(comm.speedup_vs_base, 3650.0 / 3150.0);  // medians of 3600, 3700 / 3100, 3200
  const std::string md = format_ablation_markdown(*rep);
  EXPECT_NE(md.find("peak RSS per rank (measured, max over ranks, median)"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| base | — | 3150 | 3100–3200 | 1.00× | — | 120.0 MiB | 110.0 MiB | 12.0 ms "
                    "| 0% of 12.0 ms |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| +comm | — | 3650 | 3600–3700 | 1.16× | 1.16× | 120.0 MiB | 110.0 MiB | "
                    "3.0 ms | 75% of 12.0 ms |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("summed over the 2 ranks"), std::string::npos) << md;
  const nlohmann::ordered_json j = ablation_to_json(*rep);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_DOUBLE_EQ(j["rows"][1]["median"]["comm_exposed_s_per_step"].get<double>(), 0.003);
  EXPECT_DOUBLE_EQ(j["rows"][1]["median"]["comm_overlapped_share"].get<double>(), 0.75);
  EXPECT_EQ(j["rows"][0]["overlap_comm"], false);
  const std::string svg = render_bar_chart_svg(ablation_chart(*rep));
  EXPECT_NE(svg.find("exposed comm per step (overlapped share): base 12.0 ms (0%), +comm 3.0 ms "
                     "(75%)"),
            std::string::npos);
  EXPECT_NE(svg.find("2 ranks × 1 thread)"), std::string::npos);
  // results.json round-trips at 2 ranks (world size, comm) to the same table.
  auto runs = runs_from_results_json(j.dump(), "results.json");
  ASSERT_TRUE(runs.ok()) << runs.status().to_string();
  auto again = summarize_ablation(ablation_configs(""), *runs, {}, 2, fixed_peak());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(format_ablation_markdown(*again), md);
}

TEST(AblationReport, OneRankShowsCommAsNaAndRefusesMixedWorldSizes) {
  const AblationReport rep = fixed_report();
  const std::string md = format_ablation_markdown(rep);
  EXPECT_NE(md.find("| 700.0 MiB | n/a | n/a | none |"), std::string::npos) << md;
  EXPECT_NE(md.find("--np N"), std::string::npos) << md;
  EXPECT_TRUE(ablation_to_json(rep)["rows"][0]["median"]["comm_exposed_s_per_step"].is_null());
  auto runs = fixed_runs();
  runs[3].world_size = 2;
  auto mixed = summarize_ablation(ablation_configs(""), runs, {}, 1, fixed_peak());
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("ran on 2 ranks"), std::string::npos)
      << mixed.status().message();
}

TEST(AblationReport, RefusesRunsOfDifferentShapes) {
  auto runs = fixed_runs();
  runs[4].seq_len = 128;
  auto rep = summarize_ablation(ablation_configs(""), runs, {}, 1, fixed_peak());
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("different"), std::string::npos);
}

// The chart, parsed back, says what results.json says.
TEST(AblationChart, SvgNumbersMatchResultsJson) {
  const AblationReport rep = fixed_report();
  const nlohmann::ordered_json results = ablation_to_json(rep);
  const std::string svg = render_bar_chart_svg(ablation_chart(rep));
  ASSERT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);  // self-contained: nothing linked
  EXPECT_EQ(svg.find("@import"), std::string::npos);

  const auto bars = elements(svg, "rect", "bar");
  const auto errorbars = elements(svg, "line", "errorbar");
  const auto markers = elements(svg, "line", "marker");
  const auto values = elements(svg, "text", "value");
  const auto unavailable = elements(svg, "text", "unavailable");
  const double mib = static_cast<double>(kMiB);
  int measured_rows = 0;
  for (const auto& row : results["rows"]) {
    const std::string name = row["name"];
    // The label breaks "+compile +ckpt-opt" over two lines; data-category is the name.
    const std::string category = name;
    if (!row["available"].get<bool>()) {
      int found = 0;
      for (const auto& u : unavailable) found += u.at("data-category") == category ? 1 : 0;
      EXPECT_EQ(found, 2) << name << ": n/a in both panels";
      continue;
    }
    ++measured_rows;
    const auto& med = row["median"];
    // Panel 0: tokens/s; panel 1: peak RSS in MiB.
    const std::map<std::string, std::array<double, 3>> expected = {
        {"0",
         {med["tokens_per_s"].get<double>(), med["tokens_per_s_min"].get<double>(),
          med["tokens_per_s_max"].get<double>()}},
        {"1",
         {med["peak_rss_bytes"].get<double>() / mib, med["peak_rss_bytes_min"].get<double>() / mib,
          med["peak_rss_bytes_max"].get<double>() / mib}}};
    for (const auto& [panel, want] : expected) {
      const AxisMap axis = axis_of(svg, panel);
      // Coordinates are written with 2 decimals: 0.005 px on a 300 px axis of at most 2000
      // (tokens/s) or 1000 (MiB) is < 0.04 of a unit; 0.1 bounds that.
      const double unit = 0.1;
      // Values are written as integers at these sizes: half a unit of rounding.
      const double written = 0.5;
      bool seen_bar = false, seen_err = false, seen_value = false;
      for (const auto& b : bars) {
        if (b.at("data-panel") != panel || b.at("data-category") != category) continue;
        seen_bar = true;
        EXPECT_NEAR(num(b, "data-value"), want[0], 1e-9 * want[0]) << name;
        // The bar's top, read through the tick labels.
        EXPECT_NEAR(axis.value_at(num(b, "y")), want[0], unit) << name << " panel " << panel;
        // Its bottom is the axis' zero.
        EXPECT_NEAR(axis.value_at(num(b, "y") + num(b, "height")), 0.0, unit) << name;
      }
      for (const auto& e : errorbars) {
        if (e.at("data-panel") != panel || e.at("data-category") != category) continue;
        seen_err = true;
        EXPECT_NEAR(axis.value_at(num(e, "y1")), want[1], unit) << name << " min";
        EXPECT_NEAR(axis.value_at(num(e, "y2")), want[2], unit) << name << " max";
      }
      for (const auto& v : values) {
        if (v.at("data-panel") != panel || v.at("data-category") != category) continue;
        seen_value = true;
        EXPECT_NEAR(std::stod(v.at("#text")), want[0], written) << name << " written value";
      }
      EXPECT_TRUE(seen_bar && seen_err && seen_value) << name << " panel " << panel;
    }
    // The predicted peak: a marker on the memory panel.
    bool seen_marker = false;
    for (const auto& m : markers) {
      if (m.at("data-panel") != "1" || m.at("data-category") != category) continue;
      seen_marker = true;
      EXPECT_NEAR(axis_of(svg, "1").value_at(num(m, "y1")),
                  med["predicted_peak_rss_bytes"].get<double>() / mib, 0.1)
          << name;
    }
    EXPECT_TRUE(seen_marker) << name;
  }
  EXPECT_EQ(measured_rows, 3);
  EXPECT_EQ(bars.size(), 6u);  // 3 measured rows × 2 panels
  EXPECT_NE(svg.find("540.3 GFLOP/s fp32, measured"), std::string::npos);
}

TEST(AblationChart, PeersAreRowsWithARatioColumn) {
  auto peers = runs_from_peer_lines(
      "{\"peer\": \"PyTorch eager\", \"tokens_per_s\": 1000, \"peak_rss_bytes\": 1073741824, "
      "\"batch_size\": 4, \"seq_len\": 256, \"threads\": 2}\n\n"
      "{\"peer\": \"PyTorch eager\", \"tokens_per_s\": 1100, \"peak_rss_bytes\": 1073741824}\n"
      "{\"peer\": \"PyTorch compile\", \"tokens_per_s\": 1300, \"peak_rss_bytes\": 2147483648}\n",
      "peers.jsonl");
  ASSERT_TRUE(peers.ok()) << peers.status().to_string();
  ASSERT_EQ(peers->size(), 3u);
  EXPECT_EQ((*peers)[1].round, 2);
  const AblationReport rep = fixed_report(*peers);
  ASSERT_EQ(rep.rows.size(), 6u);
  EXPECT_EQ(rep.ratio_baseline, "PyTorch eager");
  EXPECT_EQ(rep.rows[4].tokens_per_s.median, 1050);
  const std::string md = format_ablation_markdown(rep);
  EXPECT_NE(md.find("× PyTorch eager |"), std::string::npos) << md;
  // +compile: 1474 / 1050.
  EXPECT_NE(md.find("| 1.40× |\n"), std::string::npos) << md;
  const std::string svg = render_bar_chart_svg(ablation_chart(rep));
  EXPECT_EQ(elements(svg, "rect", "bar").size(), 10u);
  EXPECT_NE(svg.find("PyTorch peers"), std::string::npos);
}

// A peer under autocast says so (peer_train.py --precision bf16), and results.json keeps it.
TEST(AblationChart, PeersKeepTheirPrecision) {
  auto peers = runs_from_peer_lines(
      "{\"peer\": \"a\", \"tokens_per_s\": 1, \"peak_rss_bytes\": 1, \"precision\": \"bf16\"}\n"
      "{\"peer\": \"b\", \"tokens_per_s\": 1, \"peak_rss_bytes\": 1, \"precision\": \"fp32\"}\n"
      "{\"peer\": \"c\", \"tokens_per_s\": 1, \"peak_rss_bytes\": 1}\n",
      "peers.jsonl");
  ASSERT_TRUE(peers.ok()) << peers.status().to_string();
  ASSERT_EQ(peers->size(), 3u);
  EXPECT_EQ((*peers)[0].precision, "bf16");
  EXPECT_EQ((*peers)[1].precision, "f32");
  EXPECT_EQ((*peers)[2].precision, "f32");
}

TEST(AblationChart, BadPeerLinesAreOneLineErrors) {
  EXPECT_FALSE(runs_from_peer_lines("not json\n", "p.jsonl").ok());
  EXPECT_FALSE(runs_from_peer_lines("{\"tokens_per_s\": 1}\n", "p.jsonl").ok());
  auto s = runs_from_peer_lines("{\"peer\": \"x\", \"tokens_per_s\": 1}\n", "p.jsonl");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("p.jsonl:1"), std::string::npos);
  EXPECT_NE(s.status().message().find("peak_rss_bytes"), std::string::npos);
}

TEST(AblationChart, ResultsJsonRoundTrips) {
  const AblationReport rep = fixed_report();
  auto runs = runs_from_results_json(ablation_to_json(rep).dump(), "results.json");
  ASSERT_TRUE(runs.ok()) << runs.status().to_string();
  ASSERT_EQ(runs->size(), fixed_runs().size());
  auto again = summarize_ablation(ablation_configs(""), *runs, {}, 1, fixed_peak());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(format_ablation_markdown(*again), format_ablation_markdown(rep));
  // The runs' own measured peaks travel too, so --from divides by the same figure.
  std::vector<AblationRun> measured = fixed_runs();
  measured[2].measured_peak_flops = 600.0e9;
  // And the precision, which names that peak (session 21's first bf16 tables from --from read
  // "fp32": results.json had no precision).
  for (AblationRun& run : measured) run.precision = "bf16";
  auto mrep = summarize_ablation(ablation_configs(""), measured, {}, 1, fixed_peak());
  ASSERT_TRUE(mrep.ok());
  auto back = runs_from_results_json(ablation_to_json(*mrep).dump(), "results.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_DOUBLE_EQ(highest_measured_peak(fixed_peak(), *back).flops, 600.0e9);
  EXPECT_EQ(back->front().precision, "bf16");
  EXPECT_NE(highest_measured_peak(fixed_peak(), *back).describe.find("for bf16"),
            std::string::npos);
}

TEST(SvgChart, NiceAxis) {
  EXPECT_EQ(nice_axis(131000).top, 150000);
  EXPECT_EQ(nice_axis(131000).step, 25000);
  EXPECT_EQ(nice_axis(1650).top, 2000);
  EXPECT_EQ(nice_axis(850).top, 1000);
  EXPECT_EQ(nice_axis(0).top, 1);
  EXPECT_EQ(xml_escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

}  // namespace
}  // namespace lj::cli
