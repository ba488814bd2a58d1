// CPU kernels of the fused SwiGLU (f32, f64, and bf16 in f32 blocks), all operands of one shape
// (the packed forms below: gate and up as the two halves of one last dim):
//
//   swiglu(gate, up) -> out = silu(gate) * up,  silu(g) = g / (1 + exp(-g))
//   swiglu_backward(dout, gate, up) -> dgate = (dout * up) * (s * (1 + g * (1 - s))),
//                                      dup = dout * silu(g),  s = 1 / (1 + exp(-g))
//
// Each formula is the one the primitive ops compute (elementwise.cc's silu and sigmoid, the VJPs
// of silu and mul), in the same order with the same exp: f32 runs on 8-lane vectors through
// simd::exp_vec (the tail through one zero-padded vector, as map_f32 does), f64 uses libm's exp.
// Pure per element, so the thread count never changes a result.
//
// The packed forms take gate and up side by side in one (..., 2F) tensor (the experts' fused
// gate-up GEMM output, models/moe.cc) and write the gradient whole, with the same lane functions:
// no slice copies before and no concat after. f32 rows run in place; at mixtral-h256's (2048,
// 1792) they take 438 us forward and 683 us backward against 346 and 507 us for the unpacked
// kernels, which needed two 7.3 MB slices and a 14.7 MB concat besides (bench/micro/moe_bench.cc
// BM_experts_swiglu, AMD EPYC, 2 threads). Staging the f32 rows through stack blocks, as bf16
// must, ran 3.4-4.5x slower (1167 and 2229 us).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

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

// The f64 formulas, per element (the same operations in the same order as the lanes above).
inline double swiglu_f64(double g, double u) {
  const double silu = g / (1.0 + std::exp(-g));
  return silu * u;
}
inline void swiglu_backward_f64(double dout, double g, double u, double* dg, double* du) {
  const double e_neg = 1.0 + std::exp(-g);
  const double s = 1.0 / e_neg;
  *dg = (dout * u) * (s * (1.0 + g * (1.0 - s)));
  *du = dout * (g / e_neg);
}

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
    for (int64_t i = b; i < e; ++i) o[i] = swiglu_f64(g[i], u[i]);
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
    for (int64_t i = b; i < e; ++i) swiglu_backward_f64(dout[i], g[i], u[i], &dg[i], &du[i]);
  });
  return ok_status();
}

// The packed forms: rows of x (rows, 2F) hold gate then up; each row runs the lane functions
// above on its halves, so every element is bitwise what swiglu / swiglu_backward give the halves
// as separate tensors. bf16 rows go through f32 blocks, rounded once, as map_lanes_bf16 does.
template <class T>
void packed_rows(KernelContext& c, bool backward) {
  const TensorView& x = c.in[backward ? 1 : 0];
  const int64_t two_f = x.dims.back(), f = two_f / 2;
  const int64_t rows = two_f == 0 ? 0 : x.numel() / two_f;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(two_f, 1));
  parallel_for(c.threads, rows, grain, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<T, float>) {
      // f32 rows in place: the halves are the lane functions' operands as they lie.
      for (int64_t r = b; r < e; ++r) {
        const float* xr = x.as<float>() + r * two_f;
        if (!backward) {
          const float* const in[2] = {xr, xr + f};
          float* const out[1] = {c.out[0].as<float>() + r * f};
          map_lanes(in, out, 0, f, swiglu_lanes);
        } else {
          float* dx = c.out[0].as<float>() + r * two_f;
          const float* const in[3] = {c.in[0].as<float>() + r * f, xr, xr + f};
          float* const out[2] = {dx, dx + f};
          map_lanes(in, out, 0, f, swiglu_backward_lanes);
        }
      }
    } else {
      // bf16 rows through f32 blocks, each output rounded once.
      constexpr int64_t kBlock = 512;
      float xs[3][kBlock], ys[2][kBlock];
      const float* const in2[2] = {xs[0], xs[1]};
      const float* const in3[3] = {xs[0], xs[1], xs[2]};
      float* const out1[1] = {ys[0]};
      float* const out2[2] = {ys[0], ys[1]};
      for (int64_t r = b; r < e; ++r) {
        const uint16_t* xr = x.as<uint16_t>() + r * two_f;
        for (int64_t j = 0; j < f; j += kBlock) {
          const int64_t len = std::min(kBlock, f - j);
          if (!backward) {
            bf16_to_f32_row(xr + j, xs[0], len);
            bf16_to_f32_row(xr + f + j, xs[1], len);
            map_lanes(in2, out1, 0, len, swiglu_lanes);
            f32_to_bf16_row(ys[0], c.out[0].as<uint16_t>() + r * f + j, len);
          } else {
            bf16_to_f32_row(c.in[0].as<uint16_t>() + r * f + j, xs[0], len);
            bf16_to_f32_row(xr + j, xs[1], len);
            bf16_to_f32_row(xr + f + j, xs[2], len);
            map_lanes(in3, out2, 0, len, swiglu_backward_lanes);
            uint16_t* dx = c.out[0].as<uint16_t>() + r * two_f;
            f32_to_bf16_row(ys[0], dx + j, len);
            f32_to_bf16_row(ys[1], dx + f + j, len);
          }
        }
      }
    }
  });
}

// f64 rows, through the f64 formulas above.
void packed_rows_f64(KernelContext& c, bool backward) {
  const TensorView& x = c.in[backward ? 1 : 0];
  const int64_t two_f = x.dims.back(), f = two_f / 2;
  const int64_t rows = two_f == 0 ? 0 : x.numel() / two_f;
  parallel_for(c.threads, rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const double* g = x.as<double>() + r * two_f;
      const double* u = g + f;
      if (!backward) {
        double* o = c.out[0].as<double>() + r * f;
        for (int64_t i = 0; i < f; ++i) o[i] = swiglu_f64(g[i], u[i]);
        continue;
      }
      const double* dout = c.in[0].as<double>() + r * f;
      double* dg = c.out[0].as<double>() + r * two_f;
      double* du = dg + f;
      for (int64_t i = 0; i < f; ++i) swiglu_backward_f64(dout[i], g[i], u[i], &dg[i], &du[i]);
    }
  });
}

Status swiglu_packed_kernel(KernelContext& c, bool backward) {
  const DType dt = c.in[backward ? 1 : 0].dtype;
  if (dt == DType::f32) {
    packed_rows<float>(c, backward);
  } else if (dt == DType::bf16) {
    packed_rows<uint16_t>(c, backward);
  } else {
    LJ_CHECK(dt == DType::f64) << "swiglu_packed: f32, bf16 or f64";
    packed_rows_f64(c, backward);
  }
  return ok_status();
}

Status swiglu_packed_forward(KernelContext& c) {
  return swiglu_packed_kernel(c, false);
}
Status swiglu_packed_backward(KernelContext& c) {
  return swiglu_packed_kernel(c, true);
}

}  // namespace

void register_swiglu(KernelTable& t) {
  t[Op::swiglu_packed] = swiglu_packed_forward;
  t[Op::swiglu_packed_backward] = swiglu_packed_backward;
  t.bf16[static_cast<int>(Op::swiglu_packed)] = true;
  t.bf16[static_cast<int>(Op::swiglu_packed_backward)] = true;
  t[Op::swiglu] = swiglu_forward;
  t[Op::swiglu_backward] = swiglu_backward;
  t.bf16[static_cast<int>(Op::swiglu)] = true;
  t.bf16[static_cast<int>(Op::swiglu_backward)] = true;
}

}  // namespace lj::cpu
