// Helpers shared by the tests that run the whole Llama (tests/model, and the unit tests that
// execute a train graph, the dist and gpu training tests): deterministic token batches, a train
// graph's inputs, the error between two runs' tensors measured at each tensor's own scale, and
// checkpoint comparisons.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "train/checkpoint.h"
#include "train/train_step.h"

namespace lj::testing_util {

// Token i of a (B, T) batch is (i * step + offset * offset_step) % vocab: different offsets give
// different batches of the same shape (tokens at offset 0, their targets at offset 1).
struct TokenPattern {
  int64_t step = 37;
  int64_t offset_step = 11;
};
Tensor tokens_of(Device& dev, int64_t B, int64_t T, int64_t offset, int64_t vocab,
                 TokenPattern pattern = {});

// The inputs of a Llama train graph, in its input order: tokens (B, T) at offset 0, targets
// (B, T) at offset 1, rope cos and sin for T, then every parameter initialised with std 0.02 and
// seed 1234.
StatusOr<std::vector<Tensor>> llama_train_inputs(Device& dev, const LlamaConfig& model, int64_t B,
                                                 int64_t T, TokenPattern pattern = {});

// max |got - ref| and max |ref| over two tensors of the same size.
struct MaxError {
  double diff = 0;
  double scale = 0;
  // Relative to the reference's largest entry (norm-wise: robust to entries near zero); the
  // absolute difference when the reference is all zeros.
  double rel() const { return scale > 0 ? diff / scale : diff; }
};
MaxError max_error(const float* got, const float* ref, int64_t n);
MaxError max_error(const Tensor& got, const Tensor& ref);

// The largest MaxError::rel over two lists of tensors (gradients, outputs) of equal sizes.
double worst_relative_error(const std::vector<Tensor>& got, const std::vector<Tensor>& ref);

// Whether two lists of tensors hold the same bytes (sizes included).
bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b);
// The largest |a[i] - b[i]| / |b[i]| over two lists of values of equal size (losses).
double max_rel(const std::vector<double>& a, const std::vector<double>& b);
// The checkpoint `out/latest` names, of a tiny-preset run (checked; the tensors stay valid).
Checkpoint latest_tiny_checkpoint(const std::string& out);

}  // namespace lj::testing_util
