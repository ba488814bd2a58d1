#include "train/data_loader.h"

namespace lj {

StatusOr<DataLoader> DataLoader::create(const TokenFile& file, int64_t batch_size, int64_t seq_len,
                                        int64_t vocab_size) {
  if (batch_size <= 0 || seq_len <= 0)
    return invalid_argument("--batch-size and --seq-len must be positive");
  DataLoader d(file);
  d.batch_size_ = batch_size;
  d.seq_len_ = seq_len;
  d.windows_ = (d.file_->size() - 1) / seq_len;
  if (d.windows_ < batch_size) {
    return invalid_argument(d.file_->path() + " holds " + std::to_string(d.file_->size()) +
                                " tokens, fewer than one batch of " + std::to_string(batch_size) +
                                " x " + std::to_string(seq_len) + " + 1",
                            "use more data or a smaller --batch-size / --seq-len");
  }
  const uint32_t max_id = d.file_->max_token();
  if (max_id >= static_cast<uint32_t>(vocab_size)) {
    return invalid_argument(d.file_->path() + " holds token id " + std::to_string(max_id) +
                                ", outside the model's vocabulary of " + std::to_string(vocab_size),
                            "was the data tokenized for this model? check --data-format");
  }
  return d;
}

void DataLoader::next(Device& dev, Tensor* tokens, Tensor* targets) {
  const int64_t B = batch_size_, T = seq_len_;
  *tokens = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
  *targets = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
  int32_t* x = tokens->data<int32_t>();
  int32_t* y = targets->data<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = ((position_ + b) % windows_) * T;
    for (int64_t t = 0; t < T; ++t) {
      x[b * T + t] = static_cast<int32_t>((*file_)[start + t]);
      y[b * T + t] = static_cast<int32_t>((*file_)[start + t + 1]);
    }
  }
  position_ += B;
}

}  // namespace lj
