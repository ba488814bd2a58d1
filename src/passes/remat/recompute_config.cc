#include <algorithm>

#include "passes/remat/remat.h"

namespace lj {

const char* recompute_policy_name(RecomputePolicy p) {
  switch (p) {
    case RecomputePolicy::none:
      return "none";
    case RecomputePolicy::selective:
      return "selective";
    case RecomputePolicy::full:
      return "full";
  }
  return "?";
}

const char* recompute_method_name(RecomputeMethod m) {
  return m == RecomputeMethod::uniform ? "uniform" : "block";
}

StatusOr<RecomputePolicy> parse_recompute_policy(std::string_view s) {
  for (RecomputePolicy p :
       {RecomputePolicy::none, RecomputePolicy::selective, RecomputePolicy::full}) {
    if (s == recompute_policy_name(p)) return p;
  }
  return invalid_argument("unknown recompute policy '" + std::string(s) + "'",
                          "use --recompute none, selective or full");
}

StatusOr<RecomputeMethod> parse_recompute_method(std::string_view s) {
  if (s == "uniform") return RecomputeMethod::uniform;
  if (s == "block") return RecomputeMethod::block;
  return invalid_argument("unknown recompute method '" + std::string(s) + "'",
                          "use --recompute-method uniform or block");
}

Status RecomputeConfig::validate(int64_t num_layers) const {
  if (policy == RecomputePolicy::none) return ok_status();
  if (layers == 0 || layers < -1) {
    return invalid_argument(
        "--recompute-layers must be at least 1 (got " + std::to_string(layers) + ")",
        "use --recompute none to recompute nothing");
  }
  if (layers > num_layers) {
    return invalid_argument("--recompute-layers " + std::to_string(layers) +
                                " is more than the model's " + std::to_string(num_layers) +
                                " layers",
                            "use a value from 1 to " + std::to_string(num_layers));
  }
  return ok_status();
}

int64_t RecomputeConfig::recomputed_layers(int64_t num_layers) const {
  if (policy == RecomputePolicy::none) return 0;
  if (method == RecomputeMethod::uniform || layers < 0) return num_layers;
  return std::min(layers, num_layers);
}

std::vector<RecomputeConfig::Region> RecomputeConfig::regions(int64_t num_layers) const {
  std::vector<Region> r;
  if (policy == RecomputePolicy::none) return r;
  if (method == RecomputeMethod::block) {
    for (int64_t l = 0; l < recomputed_layers(num_layers); ++l) r.push_back({l, l});
    return r;
  }
  const int64_t chunk = layers < 0 ? 1 : layers;
  for (int64_t l = 0; l < num_layers; l += chunk) {
    r.push_back({l, std::min(l + chunk, num_layers) - 1});
  }
  return r;
}

std::string RecomputeConfig::to_string(int64_t num_layers) const {
  if (policy == RecomputePolicy::none) return "none";
  std::string s = recompute_policy_name(policy);
  if (method == RecomputeMethod::block) {
    return s + ", " + std::to_string(recomputed_layers(num_layers)) + " of " +
           std::to_string(num_layers) + " layers (block)";
  }
  const int64_t chunk = layers < 0 ? 1 : layers;
  return s + ", every layer" +
         (chunk > 1 ? ", in chunks of " + std::to_string(chunk) + " layers" : std::string()) +
         " (uniform)";
}

}  // namespace lj
