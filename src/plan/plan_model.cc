#include "plan/plan_model.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/text_file.h"
#include "io/atomic_file.h"

namespace lj {

extern const char* const kDefaultPlanModelJson;  // generated from data/plan_model.json

namespace {

using json = nlohmann::ordered_json;

json eff_to_json(const Efficiency& e) {
  json c = json::object();
  for (int i = 0; i < kPlanOpCategories; ++i)
    c[category_name(static_cast<OpCategory>(i))] = e.compute[static_cast<size_t>(i)];
  return json{{"compute", c}, {"bandwidth", e.bandwidth}};
}

Status eff_from_json(const json& j, const std::string& where, Efficiency* e) {
  if (!j.is_object() || !j.contains("compute") || !j["compute"].is_object())
    return invalid_argument(where + ": needs an object with \"compute\" and \"bandwidth\"");
  for (int i = 0; i < kPlanOpCategories; ++i) {
    const char* name = category_name(static_cast<OpCategory>(i));
    const double v = j["compute"].value(name, 0.0);
    if (v < 0 || v > 1) return invalid_argument(where + ".compute." + name + " must be in [0, 1]");
    e->compute[static_cast<size_t>(i)] = v;
  }
  e->bandwidth = j.value("bandwidth", 1.0);
  if (e->bandwidth <= 0 || e->bandwidth > 1)
    return invalid_argument(where + ".bandwidth must be in (0, 1]");
  return ok_status();
}

}  // namespace

std::string PlanModel::to_json() const {
  json j;
  j["format"] = "ljperf plan model 1";
  j["host"] = {{"cpu", host.cpu},
               {"threads", host.threads},
               {"gemm_flops", host.gemm_flops},
               {"mem_bandwidth", host.mem_bandwidth},
               {"baseline_rss_bytes", host.baseline_rss_bytes}};
  j["cpu_memory"] = {{"reserved_factor", cpu_memory.reserved_factor},
                     {"per_node_bytes", cpu_memory.per_node_bytes},
                     {"per_param_bytes", cpu_memory.per_param_bytes},
                     {"gemm_pack_bytes", cpu_memory.gemm_pack_bytes},
                     {"fitted_records", fitted_records}};
  j["gpu_memory"] = {{"cuda_context_bytes", gpu_memory.cuda_context_bytes},
                     {"fragmentation", gpu_memory.fragmentation},
                     {"workspace_bytes", gpu_memory.workspace_bytes}};
  j["cpu_efficiency"] = eff_to_json(cpu_eff);
  j["gpu_efficiency"] = eff_to_json(gpu_eff);
  j["comm"] = {{"efficiency", comm_efficiency}, {"overlap", comm_overlap}};
  return j.dump(2) + "\n";
}

StatusOr<PlanModel> parse_plan_model(const std::string& text, const std::string& source) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string hint = "rewrite it with ljperf calibrate --device, or delete it";
  if (j.is_discarded() || !j.is_object())
    return invalid_argument("plan model " + source + " is not a JSON object", hint);
  if (j.value("format", "") != "ljperf plan model 1")
    return invalid_argument("plan model " + source + " has no \"format\": \"ljperf plan model 1\"",
                            hint);
  PlanModel m;
  m.source = source;
  try {
    const json& h = j.at("host");
    m.host.cpu = h.value("cpu", "");
    m.host.threads = h.value("threads", 0);
    m.host.gemm_flops = h.at("gemm_flops").get<double>();
    m.host.mem_bandwidth = h.at("mem_bandwidth").get<double>();
    m.host.baseline_rss_bytes = h.at("baseline_rss_bytes").get<double>();
    const json& c = j.at("cpu_memory");
    m.cpu_memory.reserved_factor = c.at("reserved_factor").get<double>();
    m.cpu_memory.per_node_bytes = c.value("per_node_bytes", 0.0);
    m.cpu_memory.per_param_bytes = c.value("per_param_bytes", 0.0);
    m.cpu_memory.gemm_pack_bytes = c.value("gemm_pack_bytes", 0.0);
    m.fitted_records = c.value("fitted_records", 0);
    const json& g = j.at("gpu_memory");
    m.gpu_memory.cuda_context_bytes = g.at("cuda_context_bytes").get<double>();
    m.gpu_memory.fragmentation = g.at("fragmentation").get<double>();
    m.gpu_memory.workspace_bytes = g.at("workspace_bytes").get<double>();
    LJ_RETURN_IF_ERROR(
        eff_from_json(j.at("cpu_efficiency"), source + ": cpu_efficiency", &m.cpu_eff));
    LJ_RETURN_IF_ERROR(
        eff_from_json(j.at("gpu_efficiency"), source + ": gpu_efficiency", &m.gpu_eff));
    m.comm_efficiency = j.at("comm").at("efficiency").get<double>();
    m.comm_overlap = j.at("comm").at("overlap").get<bool>();
  } catch (const json::exception& e) {
    return invalid_argument("plan model " + source + ": " + e.what(), hint);
  }
  if (m.host.gemm_flops <= 0 || m.host.mem_bandwidth <= 0 || m.comm_efficiency <= 0 ||
      m.comm_efficiency > 1 || m.gpu_memory.fragmentation < 1) {
    return invalid_argument("plan model " + source +
                                ": gemm_flops and mem_bandwidth must be positive, comm.efficiency "
                                "in (0, 1], gpu_memory.fragmentation >= 1",
                            hint);
  }
  return m;
}

const std::string& default_plan_model_text() {
  static const std::string text(kDefaultPlanModelJson);
  return text;
}

PlanModel default_plan_model() {
  auto m = parse_plan_model(default_plan_model_text(), "embedded defaults");
  LJ_CHECK(m.ok()) << "embedded plan model: " << m.status().message();
  return *m;
}

std::string default_plan_model_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/ljperf/plan_model.json";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.config/ljperf/plan_model.json";
}

StatusOr<PlanModel> load_plan_model(const std::string& path) {
  std::string p = path;
  if (p.empty()) {
    p = default_plan_model_path();
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) return default_plan_model();
  }
  LJ_ASSIGN_OR_RETURN(std::string text, read_text_file(p, "write one with ljperf calibrate"));
  return parse_plan_model(text, p);
}

Status save_plan_model(const PlanModel& m, const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec)
    return invalid_argument("cannot create " + dir.string() + ": " + ec.message(),
                            "choose another --out");
  const std::string text = m.to_json();
  return write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); });
}

}  // namespace lj
