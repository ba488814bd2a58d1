#include "probe/host_cache.h"

#include <cstdlib>
#include <filesystem>

#include "core/json_read.h"
#include "core/text_file.h"
#include "io/atomic_file.h"

namespace lj {

std::string host_cache_path(const std::string& file) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/ljperf/" + file;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/ljperf/" + file;
}

nlohmann::json read_host_cache(const std::string& path, const std::string& format) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nlohmann::json::array();
  auto text = read_text_file(path);
  if (!text.ok()) return nlohmann::json::array();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !cache_entry_has(j, "format", format) ||
      !json_member(j, "entries").is_array())
    return nlohmann::json::array();
  return j["entries"];
}

bool cache_entry_has(const nlohmann::json& e, const char* key, const std::string& want) {
  const std::string* s = json_string_if(json_member(e, key));
  return s != nullptr && *s == want;
}

bool cache_entry_has(const nlohmann::json& e, const char* key, int64_t want) {
  const std::optional<int64_t> i = json_int_if(json_member(e, key));
  return i.has_value() && *i == want;
}

void write_host_cache(const std::string& path, const std::string& format,
                      const nlohmann::json& entries,
                      const std::function<bool(const nlohmann::json&)>& same,
                      nlohmann::json entry) {
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& e : entries) {
    if (!same(e)) kept.push_back(e);
  }
  kept.push_back(std::move(entry));
  const std::string text = nlohmann::json{{"format", format}, {"entries", kept}}.dump(2) + "\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  (void)write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); });
}

}  // namespace lj
