#include "train/checkpoint_files.h"

#include <cmath>

#include <limits>
#include <nlohmann/json.hpp>

#include "core/json_read.h"
#include "core/text_file.h"

namespace lj {
namespace {

using json = nlohmann::json;

Status damaged(const std::string& where, const std::string& what) {
  return invalid_argument(where + ": " + what, "the checkpoint is damaged");
}

// j[key] as an integer in [lo, hi]; the value is never converted before its range is checked
// (a float or an out-of-range integer would be undefined behaviour in get<int>).
template <typename T>
Status get_int(const json& j, const char* key, int64_t lo, int64_t hi, const std::string& where,
               T* out) {
  const Json& value = json_member(j, key);
  if (!value.is_number_integer())
    return damaged(where, std::string("missing or non-integer '") + key + "'");
  const std::optional<int64_t> v = json_int_if(value);  // none above 2^63 - 1
  if (!v || *v < lo || *v > hi) {
    return damaged(where, std::string("'") + key + "' is out of range [" + std::to_string(lo) +
                              ", " + std::to_string(hi) + "]");
  }
  *out = static_cast<T>(*v);
  return ok_status();
}

StatusOr<TrainerState> trainer_state_from(const json& j, const std::string& where) {
  if (!j.is_object())
    return invalid_argument(where + " is not a valid JSON object", "the checkpoint is damaged");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  TrainerState state;
  LJ_RETURN_IF_ERROR(get_int(j, "step", 0, kMax, where, &state.step));
  LJ_RETURN_IF_ERROR(get_int(j, "optimizer_steps", 0, kMax, where, &state.optimizer_steps));
  LJ_RETURN_IF_ERROR(get_int(j, "data_position", 0, kMax, where, &state.data_position));
  LJ_RETURN_IF_ERROR(get_int(j, "skipped_steps", 0, kMax, where, &state.skipped_steps));
  // The seed is a uint64 written as such; a negative one is taken modulo 2^64 as before.
  const Json& seed = json_member(j, "seed");
  const std::optional<uint64_t> seed_u = json_uint_if(seed);
  const std::optional<int64_t> seed_i = json_int_if(seed);
  if (!seed_u && !seed_i) return damaged(where, "missing or non-integer 'seed'");
  state.seed = seed_u ? *seed_u : static_cast<uint64_t>(*seed_i);
  if (const std::string* fp = json_string_if(json_member(j, "fingerprint")))
    state.fingerprint = *fp;
  const auto ls = j.find("loss_scale");
  if (ls != j.end()) {
    if (!ls->is_object()) return damaged(where, "'loss_scale' is not an object");
    LossScaleState s;
    const std::optional<double> scale = json_number_if(json_member(*ls, "scale"));
    if (!scale || !(*scale > 0) || !std::isfinite(*scale))
      return damaged(where, "'loss_scale.scale' is missing or not a positive finite number");
    s.scale = *scale;
    LJ_RETURN_IF_ERROR(get_int(*ls, "iter", 0, kMax, where, &s.iter));
    LJ_RETURN_IF_ERROR(get_int(*ls, "last_overflow_iter", -1, kMax, where, &s.last_overflow_iter));
    LJ_RETURN_IF_ERROR(get_int(*ls, "hysteresis_left", 0, kMax, where, &s.hysteresis_left));
    LJ_RETURN_IF_ERROR(get_int(*ls, "overflows", 0, kMax, where, &s.overflows));
    state.loss_scale = s;
  }
  return state;
}

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

Status manifest_file(const json& j, const std::string& where, int world_size, ManifestFile* out) {
  if (!j.is_object()) return damaged(where, "a file entry is not an object");
  const std::string* file = json_string_if(json_member(j, "file"));
  if (file == nullptr || !plain_file_name(*file))
    return damaged(where, "a file entry's 'file' is not a file name inside the step folder");
  out->file = *file;
  LJ_RETURN_IF_ERROR(get_int(j, "rank", 0, world_size - 1, where, &out->rank));
  LJ_RETURN_IF_ERROR(
      get_int(j, "bytes", 0, std::numeric_limits<int64_t>::max(), where, &out->bytes));
  LJ_RETURN_IF_ERROR(
      get_int(j, "crc32c", 0, std::numeric_limits<uint32_t>::max(), where, &out->crc32c));
  return ok_status();
}

}  // namespace

std::string trainer_state_json(const TrainerState& state) {
  nlohmann::ordered_json j;
  j["step"] = state.step;
  j["optimizer_steps"] = state.optimizer_steps;
  j["data_position"] = state.data_position;
  j["skipped_steps"] = state.skipped_steps;
  j["seed"] = state.seed;
  j["fingerprint"] = state.fingerprint;
  if (state.loss_scale) {
    const LossScaleState& s = *state.loss_scale;
    j["loss_scale"] = {{"scale", s.scale},
                       {"iter", s.iter},
                       {"last_overflow_iter", s.last_overflow_iter},
                       {"hysteresis_left", s.hysteresis_left},
                       {"overflows", s.overflows}};
  }
  return j.dump(2);
}

StatusOr<TrainerState> parse_trainer_state(const std::string& text, const std::string& where) {
  LJ_RETURN_IF_ERROR(check_input_size(text.size(), kMaxCheckpointJsonBytes, where));
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    return invalid_argument(where + " is not a valid JSON object", "the checkpoint is damaged");
  }
  return trainer_state_from(j, where);
}

StatusOr<ShardedManifest> parse_sharded_manifest(const std::string& text,
                                                 const std::string& where) {
  LJ_RETURN_IF_ERROR(check_input_size(text.size(), kMaxCheckpointJsonBytes, where));
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return damaged(where, "not valid JSON");
  const auto format = j.find("format");
  const auto version = j.find("version");
  if (format == j.end() || *format != kShardedCheckpointFormat || version == j.end() ||
      *version != kShardedCheckpointVersion) {
    return damaged(where, "not a version " + std::to_string(kShardedCheckpointVersion) + " " +
                              kShardedCheckpointFormat + " manifest");
  }
  ShardedManifest m;
  const auto state = j.find("trainer_state");
  if (state == j.end()) return damaged(where, "no 'trainer_state'");
  LJ_ASSIGN_OR_RETURN(m.state, trainer_state_from(*state, where + " trainer_state"));
  LJ_RETURN_IF_ERROR(get_int(j, "world_size", 1, 1 << 20, where, &m.world_size));
  LJ_RETURN_IF_ERROR(get_int(j, "zero_stage", 0, 3, where, &m.zero_stage));
  const auto layout = j.find("flat_layout");
  if (layout == j.end() || !layout->is_object()) return damaged(where, "no 'flat_layout' object");
  LJ_RETURN_IF_ERROR(get_int(*layout, "numel", 0, std::numeric_limits<int64_t>::max(),
                             where + " flat_layout", &m.numel));
  const auto params = j.find("parameters");
  if (params == j.end()) return damaged(where, "no 'parameters'");
  LJ_RETURN_IF_ERROR(manifest_file(*params, where + " parameters", m.world_size, &m.parameters));
  const auto shards = j.find("optimizer_shards");
  if (shards == j.end() || !shards->is_array())
    return damaged(where, "no 'optimizer_shards' array");
  if (shards->size() > static_cast<size_t>(kMaxManifestShards))
    return damaged(where, "more than " + std::to_string(kMaxManifestShards) + " optimizer shards");
  int64_t covered = 0;
  for (const json& e : *shards) {
    ManifestShard s;
    LJ_RETURN_IF_ERROR(manifest_file(e, where + " optimizer_shards", m.world_size, &s));
    LJ_RETURN_IF_ERROR(get_int(e, "begin", 0, m.numel, where + " optimizer_shards", &s.begin));
    LJ_RETURN_IF_ERROR(get_int(e, "end", 0, m.numel, where + " optimizer_shards", &s.end));
    if (s.begin != covered || s.end <= covered) {
      return damaged(where, "optimizer shards do not tile the flat vector at element " +
                                std::to_string(covered));
    }
    covered = s.end;
    m.optimizer_shards.push_back(std::move(s));
  }
  if (covered != m.numel) {
    return damaged(where, "optimizer shards cover " + std::to_string(covered) + " of " +
                              std::to_string(m.numel) + " elements");
  }
  return m;
}

}  // namespace lj
