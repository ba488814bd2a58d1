#include "plan/coefficients.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/json_read.h"
#include "core/log.h"
#include "core/text_file.h"
#include "io/atomic_file.h"
#include "probe/host_baseline.h"

namespace lj {

extern const char* const
    kDefaultCoefficientsJson;  // generated from data/predictor_coefficients.json

namespace {

using json = nlohmann::ordered_json;

// 2: the CPU memory model prices the allocator's blocks, oneDNN's GEMM buffers and the measured
// process baseline from their causes; baseline_rss_bytes is the residual over them.
constexpr const char* kFormat = "ljperf plan model 2";
// 1: baseline_rss_bytes was the whole process, fitted with the other terms on one host. Read
// for its host profile and efficiencies; its CPU memory terms give way to the defaults.
constexpr const char* kFormatV1 = "ljperf plan model 1";

json eff_to_json(const Efficiency& e) {
  json c = json::object();
  for (int i = 0; i < kPlanOpCategories; ++i)
    c[category_name(static_cast<OpCategory>(i))] = e.compute[static_cast<size_t>(i)];
  return json{{"compute", c}, {"bandwidth", e.bandwidth}};
}

Status eff_from_json(const Json& j, const JsonWhere& at, Efficiency* e) {
  const Json& compute = json_member(j, "compute");
  if (!compute.is_object())
    return invalid_argument(at.name() + ": needs an object with \"compute\" and \"bandwidth\"",
                            at.hint);
  for (int i = 0; i < kPlanOpCategories; ++i) {
    const char* name = category_name(static_cast<OpCategory>(i));
    LJ_ASSIGN_OR_RETURN(const double v, json_read_or<double>(json_member(compute, name), 0.0,
                                                             at / "compute" / name));
    if (v < 0 || v > 1)
      return invalid_argument(at.name() + ".compute." + name + " must be in [0, 1]", at.hint);
    e->compute[static_cast<size_t>(i)] = v;
  }
  LJ_ASSIGN_OR_RETURN(e->bandwidth,
                      json_read_or<double>(json_member(j, "bandwidth"), 1.0, at / "bandwidth"));
  if (e->bandwidth <= 0 || e->bandwidth > 1)
    return invalid_argument(at.name() + ".bandwidth must be in (0, 1]", at.hint);
  return ok_status();
}

}  // namespace

std::string PredictorCoefficients::to_json() const {
  json j;
  j["format"] = kFormat;
  j["host"] = {{"cpu", host.cpu},
               {"threads", host.threads},
               {"gemm_flops", host.gemm_flops},
               {"mem_bandwidth", host.mem_bandwidth},
               {"baseline_rss_bytes", host.baseline_rss_bytes}};
  j["cpu_memory"] = {{"reserved_factor", cpu_memory.reserved_factor},
                     {"per_node_bytes", cpu_memory.per_node_bytes},
                     {"per_param_bytes", cpu_memory.per_param_bytes},
                     {"gemm_pack_bytes", cpu_memory.gemm_pack_bytes},
                     {"gemm_buffer_factor", cpu_memory.gemm_buffer_factor},
                     {"fitted_records", fitted_records}};
  j["gpu_memory"] = {{"cuda_context_bytes", gpu_memory.cuda_context_bytes},
                     {"fragmentation", gpu_memory.fragmentation},
                     {"workspace_bytes", gpu_memory.workspace_bytes}};
  j["cpu_efficiency"] = eff_to_json(cpu_eff);
  j["gpu_efficiency"] = eff_to_json(gpu_eff);
  j["comm"] = {{"efficiency", comm_efficiency}, {"overlap", comm_overlap}};
  return j.dump(2) + "\n";
}

StatusOr<PredictorCoefficients> parse_coefficients(const std::string& text,
                                                   const std::string& source) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string hint = "rewrite it with ljperf calibrate --measure, or delete it";
  if (j.is_discarded() || !j.is_object())
    return invalid_argument("coefficients file " + source + " is not a JSON object", hint);
  const std::string* format_field = json_string_if(json_member(j, "format"));
  const std::string format = format_field != nullptr ? *format_field : "";
  if (format != kFormat && format != kFormatV1)
    return invalid_argument(
        "coefficients file " + source + " has no \"format\": \"" + kFormat + "\"", hint);
  PredictorCoefficients m;
  m.source = source;
  const JsonWhere at{"coefficients file " + source, "", hint};
  // The number `key` of the object `o` (at `where`): required, or `fallback` when absent.
  const auto number = [](const Json& o, const char* key, const JsonWhere& where, double* out) {
    LJ_ASSIGN_OR_RETURN(*out, json_read<double>(json_member(o, key), where / key));
    return ok_status();
  };
  const auto number_or = [](const Json& o, const char* key, double fallback, const JsonWhere& where,
                            double* out) {
    LJ_ASSIGN_OR_RETURN(*out, json_read_or<double>(json_member(o, key), fallback, where / key));
    return ok_status();
  };
  const Json& h = json_member(j, "host");
  LJ_RETURN_IF_ERROR(json_need_object(h, at / "host"));
  LJ_ASSIGN_OR_RETURN(m.host.cpu,
                      json_read_or<std::string>(json_member(h, "cpu"), "", at / "host" / "cpu"));
  LJ_ASSIGN_OR_RETURN(m.host.threads,
                      json_read_or<int>(json_member(h, "threads"), 0, at / "host" / "threads"));
  LJ_RETURN_IF_ERROR(number(h, "gemm_flops", at / "host", &m.host.gemm_flops));
  LJ_RETURN_IF_ERROR(number(h, "mem_bandwidth", at / "host", &m.host.mem_bandwidth));
  LJ_RETURN_IF_ERROR(number(h, "baseline_rss_bytes", at / "host", &m.host.baseline_rss_bytes));
  const Json& c = json_member(j, "cpu_memory");
  const JsonWhere cm = at / "cpu_memory";
  LJ_RETURN_IF_ERROR(json_need_object(c, cm));
  LJ_RETURN_IF_ERROR(number(c, "reserved_factor", cm, &m.cpu_memory.reserved_factor));
  LJ_RETURN_IF_ERROR(number_or(c, "per_node_bytes", 0.0, cm, &m.cpu_memory.per_node_bytes));
  LJ_RETURN_IF_ERROR(number_or(c, "per_param_bytes", 0.0, cm, &m.cpu_memory.per_param_bytes));
  LJ_RETURN_IF_ERROR(number_or(c, "gemm_pack_bytes", 0.0, cm, &m.cpu_memory.gemm_pack_bytes));
  LJ_RETURN_IF_ERROR(number_or(c, "gemm_buffer_factor", 1.0, cm, &m.cpu_memory.gemm_buffer_factor));
  LJ_ASSIGN_OR_RETURN(m.fitted_records, json_read_or<int>(json_member(c, "fitted_records"), 0,
                                                          cm / "fitted_records"));
  const Json& g = json_member(j, "gpu_memory");
  const JsonWhere gm = at / "gpu_memory";
  LJ_RETURN_IF_ERROR(json_need_object(g, gm));
  LJ_RETURN_IF_ERROR(number(g, "cuda_context_bytes", gm, &m.gpu_memory.cuda_context_bytes));
  LJ_RETURN_IF_ERROR(number(g, "fragmentation", gm, &m.gpu_memory.fragmentation));
  LJ_RETURN_IF_ERROR(number(g, "workspace_bytes", gm, &m.gpu_memory.workspace_bytes));
  LJ_RETURN_IF_ERROR(
      eff_from_json(json_member(j, "cpu_efficiency"), at / "cpu_efficiency", &m.cpu_eff));
  LJ_RETURN_IF_ERROR(
      eff_from_json(json_member(j, "gpu_efficiency"), at / "gpu_efficiency", &m.gpu_eff));
  const Json& comm = json_member(j, "comm");
  LJ_RETURN_IF_ERROR(number(comm, "efficiency", at / "comm", &m.comm_efficiency));
  LJ_ASSIGN_OR_RETURN(m.comm_overlap,
                      json_read<bool>(json_member(comm, "overlap"), at / "comm" / "overlap"));
  if (format == kFormatV1 && source != "embedded defaults") {
    const PredictorCoefficients d = default_coefficients();
    m.cpu_memory = d.cpu_memory;
    m.host.baseline_rss_bytes = d.host.baseline_rss_bytes;
    m.fitted_records = 0;
  }
  if (m.host.gemm_flops <= 0 || m.host.mem_bandwidth <= 0 || m.comm_efficiency <= 0 ||
      m.comm_efficiency > 1 || m.gpu_memory.fragmentation < 1) {
    return invalid_argument("coefficients file " + source +
                                ": gemm_flops and mem_bandwidth must be positive, comm.efficiency "
                                "in (0, 1], gpu_memory.fragmentation >= 1",
                            hint);
  }
  return m;
}

const std::string& default_coefficients_text() {
  static const std::string text(kDefaultCoefficientsJson);
  return text;
}

PredictorCoefficients default_coefficients() {
  auto m = parse_coefficients(default_coefficients_text(), "embedded defaults");
  LJ_CHECK(m.ok()) << "embedded coefficients: " << m.status().message();
  return *m;
}

std::string default_coefficients_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg != '\0')
    return std::string(xdg) + "/ljperf/predictor_coefficients.json";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.config/ljperf/predictor_coefficients.json";
}

StatusOr<PredictorCoefficients> load_coefficients(const std::string& path) {
  std::string p = path;
  if (p.empty()) {
    p = default_coefficients_path();
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) {
      // Calibrations written before the file was renamed (ljperf 0.1: plan_model.json).
      const std::string old = std::filesystem::path(p).replace_filename("plan_model.json");
      if (!std::filesystem::exists(old, ec)) return default_coefficients();
      p = old;
    }
  }
  LJ_ASSIGN_OR_RETURN(std::string text, read_text_file(p, "write one with ljperf calibrate"));
  return parse_coefficients(text, p);
}

Status save_coefficients(const PredictorCoefficients& m, const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec)
    return invalid_argument("cannot create " + dir.string() + ": " + ec.message(),
                            "choose another --out");
  const std::string text = m.to_json();
  return write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); });
}

Status attach_host_baseline(PredictorCoefficients* coeffs, int threads, bool may_probe) {
  StatusOr<HostBaseline> got = host_baseline(threads, /*remeasure=*/false, may_probe);
  if (!got.ok()) {
    // A prediction without the baseline is still a prediction (low by ~20 MiB): say so.
    LJ_LOG(warning) << got.status().message() << "; predicting without the process baseline";
    return ok_status();
  }
  const HostBaseline& b = *got;
  coeffs->host.process_baseline_bytes = b.bytes;
  coeffs->host.process_baseline_measured = b.measured;
  return ok_status();
}

}  // namespace lj
