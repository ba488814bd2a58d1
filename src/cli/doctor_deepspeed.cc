// The doctor's stage3_prefetch_bucket_size rule; see doctor_deepspeed.h.
#include "cli/doctor_deepspeed.h"

#include "core/json_read.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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
  if (text != nullptr && (*text == "auto" || text->empty())) {
    return {CheckLevel::ok, src + ": " + key + " is " + v->dump() + " (resolved as 0.9·hidden²)",
            ""};
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

CheckLine deepspeed_file_advice(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return {CheckLevel::fail, "cannot read DeepSpeed config " + path + ": " + std::strerror(errno),
            "check the --deepspeed path"};
  }
  std::ostringstream text;
  text << f.rdbuf();
  return stage3_prefetch_advice(text.str(), path);
}

}  // namespace lj::cli
