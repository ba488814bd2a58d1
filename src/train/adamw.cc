#include "train/adamw.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace lj {

AdamW::AdamW(Device& dev, const std::vector<Tensor>& params, AdamWConfig config)
    : config_(config), threads_(dev.threads()) {
  for (const Tensor& p : params) {
    LJ_CHECK(p.dtype() == DType::f32) << "AdamW updates f32 parameters";
    m_.push_back(Tensor::zeros(dev, DType::f32, p.dims(), MemCategory::optimizer));
    v_.push_back(Tensor::zeros(dev, DType::f32, p.dims(), MemCategory::optimizer));
  }
}

void AdamW::step(std::vector<Tensor>& params, const std::vector<Tensor>& grads, double lr) {
  LJ_CHECK_EQ(params.size(), grads.size());
  ++step_;
  const double b1 = config_.beta1, b2 = config_.beta2;
  // torch: step_size = lr / (1 - b1^t); denom = sqrt(v) / sqrt(1 - b2^t) + eps.
  const float bc1 = static_cast<float>(1.0 - std::pow(b1, static_cast<double>(step_)));
  const float bc2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(b2, static_cast<double>(step_))));
  const float step_size = static_cast<float>(lr) / bc1;
  const float decay = static_cast<float>(1.0 - lr * config_.weight_decay);
  const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2),
              eps = static_cast<float>(config_.eps);
  for (size_t i = 0; i < params.size(); ++i) {
    float* p = params[i].data<float>();
    const float* g = grads[i].data<float>();
    float* m = m_[i].data<float>();
    float* v = v_[i].data<float>();
    const int64_t n = params[i].numel();
#pragma omp parallel for schedule(static) num_threads(threads_) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) {
      p[k] *= decay;
      m[k] = fb1 * m[k] + (1.0f - fb1) * g[k];
      v[k] = fb2 * v[k] + (1.0f - fb2) * g[k] * g[k];
      p[k] -= step_size * m[k] / (std::sqrt(v[k]) / bc2_sqrt + eps);
    }
  }
}

double global_grad_norm(const std::vector<Tensor>& grads, int threads) {
  // Fixed chunks summed in order: the result does not depend on thread scheduling (an OpenMP
  // reduction clause combines partial sums in an unspecified order).
  constexpr int64_t kChunk = 16384;
  double total = 0;
  std::vector<double> partial;
  for (const Tensor& t : grads) {
    const float* g = t.data<float>();
    const int64_t n = t.numel();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    partial.assign(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) num_threads(threads) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
      double s = 0;
      const int64_t end = std::min(n, (c + 1) * kChunk);
      for (int64_t k = c * kChunk; k < end; ++k) s += static_cast<double>(g[k]) * g[k];
      partial[static_cast<size_t>(c)] = s;
    }
    for (double s : partial) total += s;
  }
  return std::sqrt(total);
}

void scale_grads(std::vector<Tensor>& grads, double scale, int threads) {
  const auto f = static_cast<float>(scale);
  for (Tensor& t : grads) {
    float* g = t.data<float>();
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) g[k] *= f;
  }
}

}  // namespace lj
