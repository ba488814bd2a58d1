// The doctor's stage3_prefetch_bucket_size rule; see doctor_deepspeed.h.
#include "cli/doctor_deepspeed.h"

#include "core/json_read.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/deepspeed_config.h"

namespace lj::cli {

CheckLine stage3_prefetch_advice(std::string_view json_text, const std::string& src) {
  using json = nlohmann::json;
  const std::string key = "zero_optimization.stage3_prefetch_bucket_size";
  const std::string advice = "leave it empty or set it to \"auto\"";
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return {CheckLevel::fail, src + ": not valid JSON", "check the DeepSpeed config's syntax"};
  if (!j.is_object())
    return {CheckLevel::fail, src + ": not a JSON object", "a DeepSpeed config is one JSON object"};
  const auto zo = j.find("zero_optimization");
  if (zo == j.end() || zo->is_null()) {
    return {CheckLevel::ok, src + ": no zero_optimization block, so " + key + " is empty", ""};
  }
  if (!zo->is_object()) {
    return {CheckLevel::fail, src + ": zero_optimization is " + zo->dump() + ", not an object",
            "zero_optimization holds the ZeRO settings as a JSON object"};
  }
  const auto v = zo->find("stage3_prefetch_bucket_size");
  if (v == zo->end() || v->is_null()) return {CheckLevel::ok, src + ": " + key + " is empty", ""};
  const std::string* text = json_string_if(*v);
  if (text != nullptr && *text == "auto") {
    return {CheckLevel::ok, src + ": " + key + " is \"auto\" (resolved as int(0.9·hidden²))", ""};
  }
  if (text != nullptr && text->empty()) {
    return {CheckLevel::ok, src + ": " + key + " is empty (DeepSpeed's default, 50000000)", ""};
  }
  if (v->is_number()) {
    return {CheckLevel::warn, src + ": " + key + " is set to " + v->dump(),
            advice +
                ", as the image's usage notes ask: the prefetch bucket sets how finely "
                "communication splits the compiled graph"};
  }
  return {CheckLevel::fail, src + ": " + key + " is " + v->dump() + ", not a number or \"auto\"",
          advice};
}

std::vector<CheckLine> deepspeed_parse_lines(const std::string& json_text, const std::string& src) {
  // The sizes "auto" needs a model for; benchmark and train resolve them for theirs. Only the
  // file's problems are reported here, never values.
  RunSettings run;
  run.hidden_size = 4096;
  const StatusOr<DeepSpeedConfig> ds = parse_deepspeed_config(json_text, src, run);
  if (!ds.ok()) return {{CheckLevel::fail, ds.status().message(), ds.status().hint()}};
  std::vector<CheckLine> lines;
  for (const std::string& w : ds->warnings) {
    lines.push_back({CheckLevel::warn, w, "benchmark and train warn about it too"});
  }
  if (lines.empty()) {
    lines.push_back(
        {CheckLevel::ok, src + ": every key is one ljperf reads, as benchmark does", ""});
  }
  return lines;
}

std::vector<CheckLine> deepspeed_file_advice(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return {{CheckLevel::fail, "cannot read DeepSpeed config " + path + ": " + std::strerror(errno),
             "check the --deepspeed path"}};
  }
  std::ostringstream text;
  text << f.rdbuf();
  std::vector<CheckLine> lines{stage3_prefetch_advice(text.str(), path)};
  if (lines[0].level == CheckLevel::fail) return lines;  // not JSON: one line says so
  for (CheckLine& l : deepspeed_parse_lines(text.str(), path)) lines.push_back(std::move(l));
  return lines;
}

}  // namespace lj::cli
