#include "core/zero_config.h"

#include <string>

namespace lj {

ZeroConfig ZeroConfig::defaults(int stage) {
  ZeroConfig z;
  z.stage = stage;
  z.overlap_comm = stage == 3;
  return z;
}

int64_t ZeroConfig::auto_prefetch_bucket(int64_t hidden) {
  return static_cast<int64_t>(0.9 * static_cast<double>(hidden * hidden));
}

ZeroConfig ZeroConfig::hf_auto(int stage, int64_t hidden) {
  ZeroConfig z = defaults(stage);
  z.reduce_bucket_size = auto_reduce_bucket(hidden);
  z.stage3_prefetch_bucket_size = auto_prefetch_bucket(hidden);
  z.stage3_param_persistence_threshold = auto_persistence_threshold(hidden);
  return z;
}

Status ZeroConfig::validate() const {
  if (stage < 0 || stage > 3) {
    return invalid_argument("ZeRO stage " + std::to_string(stage) + " does not exist",
                            "zero_optimization.stage is 0, 1, 2 or 3");
  }
  if (reduce_bucket_size < 1 || allgather_bucket_size < 1) {
    return invalid_argument("ZeRO bucket sizes must be at least 1 element (reduce_bucket_size " +
                            std::to_string(reduce_bucket_size) + ", allgather_bucket_size " +
                            std::to_string(allgather_bucket_size) + ")");
  }
  if (stage3_prefetch_bucket_size < 0 || stage3_param_persistence_threshold < 0 ||
      stage3_max_live_parameters < 0 || stage3_max_reuse_distance < 0) {
    return invalid_argument("ZeRO stage-3 sizes must be >= 0", "sizes count elements");
  }
  return ok_status();
}

}  // namespace lj
