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

namespace {

// The bits of f32_to_bf16 (core/dtype.h) without a branch, so the update loop stays vectorised.
inline uint16_t round_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace

void adamw_update(const AdamWStepConstants& c, float* p, const float* g, float* m, float* v,
                  int64_t n, int threads, LowCopy low) {
  const float fb1 = c.beta1, fb2 = c.beta2, eps = c.eps, decay = c.decay;
  const float c1 = 1.0f - fb1, c2 = 1.0f - fb2;
  const float step_size = c.step_size, bc2_sqrt = c.bc2_sqrt, gs = c.grad_scale;
  float* __restrict pr = p;
  const float* __restrict gr = g;
  float* __restrict mr = m;
  float* __restrict vr = v;
  // One pass: each element's p, g, m, v are loaded once and p, m, v stored once; the arithmetic
  // is torch's, in its order (decay first, then the Adam step).
  const auto update = [=](int64_t k) {
    const float gk = gr[k] * gs;
    const float mk = fb1 * mr[k] + c1 * gk;
    const float vk = fb2 * vr[k] + c2 * gk * gk;
    mr[k] = mk;
    vr[k] = vk;
    const float pk = pr[k] * decay;
    const float pn = pk - step_size * mk / (std::sqrt(vk) / bc2_sqrt + eps);
    pr[k] = pn;
    return pn;
  };
  if (low.data == nullptr) {
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) update(k);
  } else if (low.dtype == DType::bf16) {
    uint16_t* __restrict lr = low.data;
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) lr[k] = round_to_bf16(update(k));
  } else {
    LJ_CHECK(low.dtype == DType::f16) << "a 16-bit copy is bf16 or f16";
    uint16_t* __restrict lr = low.data;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) lr[k] = f32_to_f16(update(k));
  }
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

void accumulate_squares(const float* g, int64_t n, int threads, double* sum) {
  // Fixed chunks summed in order: the result does not depend on thread scheduling (an OpenMP
  // reduction clause combines partial sums in an unspecified order). Within a chunk, element k
  // goes to partial sum k % kLanes and the partial sums are combined pairwise at the end: kLanes
  // independent f64 chains (vectorised), not one chain of dependent adds, which ran at a quarter
  // of the memory's speed.
  constexpr int64_t kChunk = 16384;
  constexpr int kLanes = 32;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) num_threads(threads) if (chunks > 4)
  for (int64_t c = 0; c < chunks; ++c) {
    double acc[kLanes] = {};
    const int64_t begin = c * kChunk, end = std::min(n, (c + 1) * kChunk);
    int64_t k = begin;
    for (; k + kLanes <= end; k += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const auto x = static_cast<double>(g[k + l]);
        acc[l] += x * x;
      }
    }
    for (int l = 0; k < end; ++k, ++l) acc[l] += static_cast<double>(g[k]) * g[k];
    for (int width = kLanes / 2; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    }
    partial[static_cast<size_t>(c)] = acc[0];
  }
  for (double s : partial) *sum += s;
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
