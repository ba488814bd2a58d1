#include "model_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"

namespace lj::testing_util {

Tensor tokens_of(Device& dev, int64_t B, int64_t T, int64_t offset, int64_t vocab,
                 TokenPattern pattern) {
  Tensor t = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
  for (int64_t i = 0; i < B * T; ++i) {
    t.data<int32_t>()[i] =
        static_cast<int32_t>((i * pattern.step + offset * pattern.offset_step) % vocab);
  }
  return t;
}

StatusOr<std::vector<Tensor>> llama_train_inputs(Device& dev, const LlamaConfig& model, int64_t B,
                                                 int64_t T, TokenPattern pattern) {
  Tensor cos, sin;
  LJ_RETURN_IF_ERROR(make_rope_inputs(dev, model, T, &cos, &sin));
  std::vector<Tensor> inputs{tokens_of(dev, B, T, 0, model.vocab_size, pattern),
                             tokens_of(dev, B, T, 1, model.vocab_size, pattern), cos, sin};
  const auto params = init_llama_params(dev, llama_param_specs(model), 0.02, 1234);
  inputs.insert(inputs.end(), params.begin(), params.end());
  return inputs;
}

MaxError max_error(const float* got, const float* ref, int64_t n) {
  MaxError e;
  for (int64_t i = 0; i < n; ++i) {
    e.diff = std::max(e.diff, std::fabs(static_cast<double>(got[i]) - ref[i]));
    e.scale = std::max(e.scale, std::fabs(static_cast<double>(ref[i])));
  }
  return e;
}

MaxError max_error(const Tensor& got, const Tensor& ref) {
  LJ_CHECK(got.numel() == ref.numel()) << got.numel() << " vs " << ref.numel();
  if (got.dtype() == DType::f32 && ref.dtype() == DType::f32) {
    return max_error(got.data<float>(), ref.data<float>(), got.numel());
  }
  const std::vector<double> g = got.to_doubles(), r = ref.to_doubles();
  MaxError e;
  for (size_t i = 0; i < g.size(); ++i) {
    e.diff = std::max(e.diff, std::fabs(g[i] - r[i]));
    e.scale = std::max(e.scale, std::fabs(r[i]));
  }
  return e;
}

double worst_relative_error(const std::vector<Tensor>& got, const std::vector<Tensor>& ref) {
  LJ_CHECK(got.size() == ref.size()) << got.size() << " vs " << ref.size();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, max_error(got[i], ref[i]).rel());
  return worst;
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].bytes() != b[i].bytes() || std::memcmp(a[i].raw(), b[i].raw(), a[i].bytes()) != 0)
      return false;
  }
  return true;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  LJ_CHECK_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
  return worst;
}

Checkpoint latest_tiny_checkpoint(const std::string& out) {
  auto model = llama_preset("tiny");
  LJ_CHECK(model.ok());
  static Device dev(1);  // outlives the tensors it gives
  auto c = load_latest_checkpoint(out, llama_param_specs(*model), dev);
  LJ_CHECK(c.ok()) << c.status().to_string();
  return std::move(*c);
}

}  // namespace lj::testing_util
