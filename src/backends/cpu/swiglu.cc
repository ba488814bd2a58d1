// CPU kernels of the fused SwiGLU (f32, f64, and bf16 in f32 blocks), all operands of one shape:
//
//   swiglu(gate, up) -> out = silu(gate) * up,  silu(g) = g / (1 + exp(-g))
//   swiglu_backward(dout, gate, up) -> dgate = (dout * up) * (s * (1 + g * (1 - s))),
//                                      dup = dout * silu(g),  s = 1 / (1 + exp(-g))
//
// Each formula is the one the primitive ops compute (elementwise.cc's silu and sigmoid, the VJPs
// of silu and mul), in the same order with the same exp: f32 runs on 8-lane vectors through
// simd::exp_vec (the tail through one zero-padded vector, as map_f32 does), f64 uses libm's exp.
// Pure per element, so the thread count never changes a result.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

// 32-byte vectors cross only inline functions here (see simd.h).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace lj::cpu {
namespace {

using simd::V;

// Over elements [b, e) of K f32 inputs and M f32 outputs: f(x, y) maps 8-lane vectors x[K] to
// y[M]; the tail goes through one zero-padded vector, so every element sees the same instructions.
template <int K, int M, class F>
void map_lanes(const float* const (&in)[K], float* const (&out)[M], int64_t b, int64_t e, F f) {
  constexpr int W = simd::kWidth<float>;
  int64_t i = b;
  for (; i + W <= e; i += W) {
    V<float> x[K];
    for (int k = 0; k < K; ++k) x[k] = simd::load(in[k] + i);
    V<float> y[M];
    f(x, y);
    for (int m = 0; m < M; ++m) simd::store(out[m] + i, y[m]);
  }
  if (i < e) {
    const size_t bytes = static_cast<size_t>(e - i) * sizeof(float);
    V<float> x[K];
    for (int k = 0; k < K; ++k) {
      float pad[W] = {};
      std::memcpy(pad, in[k] + i, bytes);
      x[k] = simd::load(pad);
    }
    V<float> y[M];
    f(x, y);
    for (int m = 0; m < M; ++m) {
      float pad[W];
      simd::store(pad, y[m]);
      std::memcpy(out[m] + i, pad, bytes);
    }
  }
}

// The f32 lane functions, shared by the f32 and bf16 paths: gate, up -> out; dout, gate, up ->
// dgate, dup.
constexpr auto swiglu_lanes = [](const V<float>* x, V<float>* y) {
  const V<float> silu = x[0] / (1.0f + simd::exp_vec<float>(-x[0]));
  y[0] = silu * x[1];
};
constexpr auto swiglu_backward_lanes = [](const V<float>* x, V<float>* y) {
  const V<float> dout = x[0], g = x[1], up = x[2];
  const V<float> e_neg = 1.0f + simd::exp_vec<float>(-g);
  const V<float> s = 1.0f / e_neg;
  const V<float> dsilu = dout * up;
  y[0] = dsilu * (s * (1.0f + g * (1.0f - s)));
  y[1] = dout * (g / e_neg);
};

// map_lanes over bf16 operands: blocks are loaded into f32, mapped exactly as f32 is, and each
// output rounded once (so a bf16 result is the f32 kernel's, rounded).
template <int K, int M, class F>
void map_lanes_bf16(const TensorView* const (&in)[K], TensorView* const (&out)[M], int threads,
                    F f) {
  constexpr int64_t kBlock = 512;
  const int64_t n = in[0]->numel();
  parallel_for(threads, n, kPointwiseGrain, [&](int64_t b, int64_t e) {
    float xs[K][kBlock], ys[M][kBlock];
    const float* xp[K];
    float* yp[M];
    for (int k = 0; k < K; ++k) xp[k] = xs[k];
    for (int m = 0; m < M; ++m) yp[m] = ys[m];
    for (int64_t i = b; i < e; i += kBlock) {
      const int64_t len = std::min(kBlock, e - i);
      for (int k = 0; k < K; ++k)
        bf16_to_f32_row(static_cast<const uint16_t*>(in[k]->data) + i, xs[k], len);
      map_lanes<K, M>(xp, yp, 0, len, f);
      for (int m = 0; m < M; ++m)
        f32_to_bf16_row(ys[m], static_cast<uint16_t*>(out[m]->data) + i, len);
    }
  });
}

Status swiglu_forward(KernelContext& c) {
  if (c.in[0].dtype == DType::bf16) {
    const TensorView* const in[2] = {&c.in[0], &c.in[1]};
    TensorView* const out[1] = {&c.out[0]};
    map_lanes_bf16(in, out, c.threads, swiglu_lanes);
    return ok_status();
  }
  const int64_t n = c.in[0].numel();
  if (c.in[0].dtype == DType::f32) {
    const float* const in[2] = {c.in[0].as<float>(), c.in[1].as<float>()};
    float* const out[1] = {c.out[0].as<float>()};
    parallel_for(c.threads, n, kPointwiseGrain,
                 [&](int64_t b, int64_t e) { map_lanes(in, out, b, e, swiglu_lanes); });
    return ok_status();
  }
  LJ_CHECK(c.in[0].dtype == DType::f64) << "swiglu: f32 or f64";
  const double* g = c.in[0].as<double>();
  const double* u = c.in[1].as<double>();
  double* o = c.out[0].as<double>();
  parallel_for(c.threads, n, kPointwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double silu = g[i] / (1.0 + std::exp(-g[i]));
      o[i] = silu * u[i];
    }
  });
  return ok_status();
}

Status swiglu_backward(KernelContext& c) {
  if (c.in[0].dtype == DType::bf16) {
    const TensorView* const in[3] = {&c.in[0], &c.in[1], &c.in[2]};
    TensorView* const out[2] = {&c.out[0], &c.out[1]};
    map_lanes_bf16(in, out, c.threads, swiglu_backward_lanes);
    return ok_status();
  }
  const int64_t n = c.in[0].numel();
  if (c.in[0].dtype == DType::f32) {
    const float* const in[3] = {c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>()};
    float* const out[2] = {c.out[0].as<float>(), c.out[1].as<float>()};
    parallel_for(c.threads, n, kPointwiseGrain,
                 [&](int64_t b, int64_t e) { map_lanes(in, out, b, e, swiglu_backward_lanes); });
    return ok_status();
  }
  LJ_CHECK(c.in[0].dtype == DType::f64) << "swiglu_backward: f32 or f64";
  const double* dout = c.in[0].as<double>();
  const double* g = c.in[1].as<double>();
  const double* u = c.in[2].as<double>();
  double* dg = c.out[0].as<double>();
  double* du = c.out[1].as<double>();
  parallel_for(c.threads, n, kPointwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double e_neg = 1.0 + std::exp(-g[i]);
      const double s = 1.0 / e_neg;
      dg[i] = (dout[i] * u[i]) * (s * (1.0 + g[i] * (1.0 - s)));
      du[i] = dout[i] * (g[i] / e_neg);
    }
  });
  return ok_status();
}

}  // namespace

void register_swiglu(KernelTable& t) {
  t[Op::swiglu] = swiglu_forward;
  t[Op::swiglu_backward] = swiglu_backward;
  t.bf16[static_cast<int>(Op::swiglu)] = true;
  t.bf16[static_cast<int>(Op::swiglu_backward)] = true;
}

}  // namespace lj::cpu
