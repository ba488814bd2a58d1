// Seeded synthetic token batches: what `ljperf benchmark` and `ljperf plan --measure` train on.
#pragma once

#include <cstdint>

#include "train/train_step.h"

namespace lj::cli {

// Batch `index` of the seeded stream: (B, T) uniform token ids in [0, vocab); targets are the
// next tokens of the same stream.
TrainStep::Batch synthetic_batch(Device& dev, int64_t B, int64_t T, int64_t vocab, uint64_t seed,
                                 int64_t index);

}  // namespace lj::cli
