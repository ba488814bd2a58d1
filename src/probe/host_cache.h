// The per-host measurement caches (probe/host_peak.h, probe/host_baseline.h): a JSON file under
// $XDG_CACHE_HOME/ljperf (else ~/.cache/ljperf) holding {"format": F, "entries": [...]}, each
// entry keyed by the host and what was measured. A cache that is absent, unreadable or of
// another format reads as empty; one that cannot be written costs a probe next time, no more.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace lj {

// $XDG_CACHE_HOME/ljperf/<file>, else $HOME/.cache/ljperf/<file>.
std::string host_cache_path(const std::string& file);

// The entries of the cache at `path` when its format is `format`; else an empty array.
nlohmann::json read_host_cache(const std::string& path, const std::string& format);

// Whether the entry `e` holds `key` equal to `want`; a missing or mistyped field (a damaged
// cache) never matches.
bool cache_entry_has(const nlohmann::json& e, const char* key, const std::string& want);
bool cache_entry_has(const nlohmann::json& e, const char* key, int64_t want);

// Writes `entries` without those `same` matches, plus `entry`, atomically (best effort).
void write_host_cache(const std::string& path, const std::string& format,
                      const nlohmann::json& entries,
                      const std::function<bool(const nlohmann::json&)>& same, nlohmann::json entry);

}  // namespace lj
