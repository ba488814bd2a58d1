// Rank, world size and local rank of a distributed launch; see launch_env.h.
#include "runtime/launch_env.h"

#include <cctype>
#include <charconv>
#include <iterator>
#include <string_view>

namespace lj {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The whole of `s` as a non-negative int, or false.
bool parse_non_negative(std::string_view s, int* out) {
  s = trim(s);
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && *out >= 0;
}

std::string join_names(const char* const* names, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::string(names[i]);
  return out;
}

// Reads the first set (non-empty) variable of `names` into *value and *var; later ones that
// disagree go to *shadowed.
template <size_t N>
Status resolve_one(const EnvLookup& env, const char* const (&names)[N], int* value,
                   std::string* var, std::vector<std::string>* shadowed) {
  for (const char* name : names) {
    const char* v = env(name);
    if (v == nullptr || *v == '\0') continue;
    int parsed = 0;
    if (!parse_non_negative(v, &parsed)) {
      return invalid_argument(
          std::string(name) + "='" + v + "' is not a non-negative integer",
          "fix or unset it; launch variables are read in the order " + join_names(names, N));
    }
    if (var->empty()) {
      *value = parsed;
      *var = name;
    } else if (parsed != *value) {
      shadowed->push_back(std::string(name) + "=" + v + " (" + *var + "=" + std::to_string(*value) +
                          " is used)");
    }
  }
  return ok_status();
}

}  // namespace

StatusOr<LaunchEnv> resolve_launch_env(const EnvLookup& env) {
  LaunchEnv e;
  LJ_RETURN_IF_ERROR(resolve_one(env, kRankVars, &e.rank, &e.rank_var, &e.shadowed));
  LJ_RETURN_IF_ERROR(
      resolve_one(env, kWorldSizeVars, &e.world_size, &e.world_size_var, &e.shadowed));
  LJ_RETURN_IF_ERROR(
      resolve_one(env, kLocalRankVars, &e.local_rank, &e.local_rank_var, &e.shadowed));
  const std::string world_src = e.world_size_var.empty()
                                    ? "no world-size variable set"
                                    : e.world_size_var + "=" + std::to_string(e.world_size);
  const std::string hint = "a launcher sets one of " + join_names(kRankVars, std::size(kRankVars)) +
                           " together with one of " +
                           join_names(kWorldSizeVars, std::size(kWorldSizeVars));
  if (e.world_size < 1)
    return invalid_argument(world_src + ": world size must be at least 1", hint);
  if (e.rank >= e.world_size) {
    return invalid_argument(e.rank_var + "=" + std::to_string(e.rank) +
                                " is not below the world size (" + world_src + ")",
                            hint);
  }
  if (e.local_rank >= e.world_size) {
    return invalid_argument(e.local_rank_var + "=" + std::to_string(e.local_rank) +
                                " is not below the world size (" + world_src + ")",
                            hint);
  }
  return e;
}

}  // namespace lj
