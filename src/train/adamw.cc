#include "train/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

AdamW::AdamW(Device& dev, const std::vector<int64_t>& state_numels, AdamWConfig config)
    : config_(config), threads_(dev.threads()) {
  for (int64_t n : state_numels) {
    m_.push_back(Tensor::zeros(dev, DType::f32, {n}, MemCategory::optimizer));
    v_.push_back(Tensor::zeros(dev, DType::f32, {n}, MemCategory::optimizer));
  }
}

AdamWStepConstants AdamW::begin_step(double lr) {
  ++step_;
  const double b1 = config_.beta1, b2 = config_.beta2;
  // torch: step_size = lr / (1 - b1^t); denom = sqrt(v) / sqrt(1 - b2^t) + eps.
  AdamWStepConstants c;
  const float bc1 = static_cast<float>(1.0 - std::pow(b1, static_cast<double>(step_)));
  c.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, static_cast<double>(step_))));
  c.step_size = static_cast<float>(lr) / bc1;
  c.decay = static_cast<float>(1.0 - lr * config_.weight_decay);
  c.beta1 = static_cast<float>(b1);
  c.beta2 = static_cast<float>(b2);
  c.eps = static_cast<float>(config_.eps);
  return c;
}

void write_low_copies(const std::vector<Tensor>& params, std::vector<Tensor>& low, int threads) {
  LJ_CHECK_EQ(params.size(), low.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!low[i].defined()) continue;
    const float* p = params[i].data<float>();
    auto* out = low[i].data<uint16_t>();
    const int64_t n = params[i].numel();
    LJ_CHECK_EQ(n, low[i].numel());
    if (low[i].dtype() == DType::bf16) {
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > 65536)
      for (int64_t k = 0; k < n; ++k) out[k] = round_to_bf16(p[k]);
    } else {
      LJ_CHECK(low[i].dtype() == DType::f16) << "a 16-bit copy is bf16 or f16";
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 65536)
      for (int64_t k = 0; k < n; ++k) out[k] = f32_to_f16(p[k]);
    }
  }
}

void AdamW::step(std::vector<Tensor>& params, const std::vector<Tensor>& grads, double lr,
                 double grad_scale, std::vector<Tensor>* low) {
  LJ_CHECK_EQ(params.size(), grads.size());
  LJ_CHECK_EQ(params.size(), m_.size());
  if (low != nullptr) LJ_CHECK_EQ(params.size(), low->size());
  AdamWStepConstants c = begin_step(lr);
  c.grad_scale = static_cast<float>(grad_scale);
  for (size_t i = 0; i < params.size(); ++i) {
    LowCopy copy;
    if (low != nullptr && (*low)[i].defined()) {
      LJ_CHECK_EQ((*low)[i].numel(), params[i].numel());
      copy = LowCopy{(*low)[i].data<uint16_t>(), (*low)[i].dtype()};
    }
    adamw_update(c, params[i].data<float>(), grads[i].data<float>(), m_[i].data<float>(),
                 v_[i].data<float>(), params[i].numel(), threads_, copy);
  }
}

double global_grad_norm(const std::vector<Tensor>& grads, int threads) {
  double total = 0;
  for (const Tensor& t : grads) accumulate_squares(t.data<float>(), t.numel(), threads, &total);
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
