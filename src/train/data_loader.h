// Batches from a token file: non-overlapping windows of T + 1 tokens (T inputs, the next T as
// targets), B windows per micro-batch, read in order and wrapping around at the end of the file.
// The position (windows consumed) is all the state there is, so a checkpoint that stores it
// resumes the exact same stream.
#pragma once

#include <cstdint>

#include "io/tokens.h"
#include "runtime/tensor.h"

namespace lj {

class DataLoader {
 public:
  // Checks that the file holds at least one batch and that every id is below vocab_size.
  // `file` must outlive the loader.
  static StatusOr<DataLoader> create(const TokenFile& file, int64_t batch_size, int64_t seq_len,
                                     int64_t vocab_size);

  // Fills tokens and targets (B, T) i32 and advances the position by B windows.
  void next(Device& dev, Tensor* tokens, Tensor* targets);
  int64_t position() const { return position_; }
  void set_position(int64_t windows) { position_ = windows; }
  int64_t windows() const { return windows_; }
  const TokenFile& file() const { return *file_; }

 private:
  explicit DataLoader(const TokenFile& file) : file_(&file) {}
  const TokenFile* file_;
  int64_t batch_size_ = 0, seq_len_ = 0;
  int64_t windows_ = 0;   // whole windows in the file
  int64_t position_ = 0;  // windows consumed since the start (not wrapped)
};

}  // namespace lj
