#include "core/mem_category.h"

namespace lj {

const char* mem_category_name(MemCategory c) {
  static constexpr const char* kNames[] = {"weights",     "grads",       "optimizer",
                                           "activations", "temporaries", "workspace"};
  return kNames[static_cast<int>(c)];
}

}  // namespace lj
