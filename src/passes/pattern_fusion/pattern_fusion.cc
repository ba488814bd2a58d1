// The pattern-fusion rules in the order compile runs them (pattern_fusion.h).
#include "passes/pattern_fusion/pattern_fusion.h"

#include <memory>

namespace lj {

void add_pattern_fusion_passes(PassManager& pm, bool recompute) {
  pm.add(std::make_unique<RopeFusion>());
  pm.add(std::make_unique<SwigluFusion>());
  pm.add(std::make_unique<RmsNormFusion>(/*add_across_layers=*/!recompute));
}

}  // namespace lj
