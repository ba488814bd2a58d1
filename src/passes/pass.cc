// PassManager: runs passes in order, verifies and dumps the graph after each.
#include "passes/pass.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace lj {
namespace {

bool verify_enabled() {
#ifndef NDEBUG
  return true;
#else
  const char* v = std::getenv("LJ_VERIFY_PASSES");
  return v != nullptr && std::string(v) == "1";
#endif
}

// DIR/NN-<pass>.txt with the graph in print_graph format.
Status dump_graph(const std::string& dir, size_t index, const std::string& pass, const Graph& g) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return io_error("cannot create LJ_DUMP directory " + dir + ": " + ec.message(),
                    "set LJ_DUMP to a writable directory, or unset it");
  }
  char prefix[32];
  std::snprintf(prefix, sizeof(prefix), "%02zu-", index);
  const std::filesystem::path path = std::filesystem::path(dir) / (prefix + pass + ".txt");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return io_error("cannot open " + path.string() + " for writing",
                    "set LJ_DUMP to a writable directory, or unset it");
  }
  out << print_graph(g);
  out.close();
  if (!out) return io_error("cannot write " + path.string(), "check free disk space");
  return ok_status();
}

}  // namespace

bool PassReport::changed() const {
  for (const PassRun& r : runs) {
    if (r.changed) return true;
  }
  return false;
}

double PassReport::wall_s() const {
  double s = 0;
  for (const PassRun& r : runs) s += r.wall_s;
  return s;
}

std::string PassReport::to_string() const {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof(line), "%-28s %-8s %10s %10s %10s\n", "pass", "changed", "nodes_in",
                "nodes_out", "ms");
  out += line;
  for (const PassRun& r : runs) {
    std::snprintf(line, sizeof(line), "%-28s %-8s %10lld %10lld %10.3f\n", r.name.c_str(),
                  r.changed ? "yes" : "no", static_cast<long long>(r.nodes_before),
                  static_cast<long long>(r.nodes_after), r.wall_s * 1e3);
    out += line;
  }
  return out;
}

void PassManager::add(std::unique_ptr<Pass> pass) {
  LJ_CHECK(pass != nullptr);
  passes_.push_back(std::move(pass));
}

std::vector<std::string> PassManager::names() const {
  std::vector<std::string> names;
  for (const auto& p : passes_) names.emplace_back(p->name());
  return names;
}

StatusOr<PassReport> PassManager::run(Graph& g) {
  PassReport report;
  const bool verify_each = verify_enabled();
  const char* dump_env = std::getenv("LJ_DUMP");
  const std::string dump_dir = dump_env != nullptr ? dump_env : "";
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass& p = *passes_[i];
    PassRun r;
    r.name = p.name();
    r.nodes_before = static_cast<int64_t>(g.nodes().size());
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<bool> changed = p.run(g);
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!changed.ok()) return changed.status().with_context("pass " + r.name);
    r.changed = *changed;
    r.nodes_after = static_cast<int64_t>(g.nodes().size());
    if (verify_each) {
      Status s = verify(g);
      if (!s.ok()) return s.with_context("graph does not verify after pass " + r.name);
    }
    if (!dump_dir.empty()) LJ_RETURN_IF_ERROR(dump_graph(dump_dir, i, r.name, g));
    report.runs.push_back(std::move(r));
  }
  return report;
}

}  // namespace lj
