#include "cli/synthetic_batch.h"

#include "core/random.h"

namespace lj::cli {

TrainStep::Batch synthetic_batch(Device& dev, int64_t B, int64_t T, int64_t vocab, uint64_t seed,
                                 int64_t index) {
  TrainStep::Batch b{Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries),
                     Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries)};
  int32_t* x = b.tokens.data<int32_t>();
  int32_t* y = b.targets.data<int32_t>();
  const uint64_t stream = seed ^ 0x5eedda7aull;
  for (int64_t r = 0; r < B; ++r) {
    const auto base = static_cast<uint64_t>((index * B + r) * (T + 1));
    for (int64_t t = 0; t < T; ++t) {
      x[r * T + t] =
          static_cast<int32_t>(random_bits(stream, base + t) % static_cast<uint64_t>(vocab));
      y[r * T + t] =
          static_cast<int32_t>(random_bits(stream, base + t + 1) % static_cast<uint64_t>(vocab));
    }
  }
  return b;
}

}  // namespace lj::cli
