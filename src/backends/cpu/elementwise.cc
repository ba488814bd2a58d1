// CPU kernels of the elementwise ops: unary math (neg ... tanh, pow_scalar), cast between any two
// dtypes, binary arithmetic (add, sub, mul, div) and comparisons (eq, lt, gt -> u8 1/0) with
// numpy broadcasting, and where(cond u8, a, b) with all three broadcast.
//
// Math ops run on f32 and f64 (f64 for gradient checks), and on bf16 (mixed precision): blocks
// of bf16 are loaded into f32, computed exactly as the f32 kernel computes, and rounded once on
// the store, so a bf16 result is the f32 result rounded to nearest even. Comparisons and where
// also take i32, i64 and u8 operands. exp, silu and sigmoid use simd::exp_vec on f32 (vectorised,
// ~2 ulp, results below e^-87.3 flush to 0) and libm's exp on f64. Operands of a binary op share a
// dtype (the builder enforces it). Every loop is a pure function per element, so the thread count
// never changes a result. Broadcasting goes through BroadcastPlan (cpu_util.h): equal shapes become
// one flat row per thread, and a broadcast operand (a bias (C) against (B, T, C), a scalar) is a
// row with inner stride 0, each case specialised below so the inner loop vectorises.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

// Elements per f32 block of a bf16 loop (on the stack: 2 KiB per operand).
constexpr int64_t kBf16Block = 512;

// y = f(x) over bf16 rows in f32 blocks: block(const float* x, float* y, n) computes one block.
template <class Block>
void unary_bf16(KernelContext& c, Block block) {
  const TensorView& x = c.in[0];
  TensorView& out = c.out[0];
  LJ_CHECK(out.dtype == DType::bf16 && x.numel() == out.numel());
  const auto* in = x.as<uint16_t>();
  auto* o = out.as<uint16_t>();
  parallel_for(c.threads, x.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
    float xf[kBf16Block], yf[kBf16Block];
    for (int64_t i = b; i < e; i += kBf16Block) {
      const int64_t n = std::min(kBf16Block, e - i);
      bf16_to_f32_row(in + i, xf, n);
      block(xf, yf, n);
      f32_to_bf16_row(yf, o + i, n);
    }
  });
}

// ---- Unary ----

// out[i] = f(x[i]) for the f32 / f64 / bf16 input (bf16 computes f on float); f is a generic
// lambda.
template <class Fn>
Status unary(KernelContext& c, Fn f) {
  const TensorView& x = c.in[0];
  TensorView& out = c.out[0];
  LJ_CHECK(x.dtype == out.dtype && x.numel() == out.numel());
  if (x.dtype == DType::bf16) {
    unary_bf16(c, [&](const float* xf, float* yf, int64_t n) {
      for (int64_t i = 0; i < n; ++i) yf[i] = f(xf[i]);
    });
    return ok_status();
  }
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* o = out.as<T>();
    parallel_for(c.threads, x.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = f(in[i]);
    });
  });
  return ok_status();
}

// unary() for the ops built on exp: f32 runs fv on simd.h vectors (simd::exp_vec, ~2 ulp), f64
// runs fs per element with libm's exp (f64 is for gradient checks, accuracy first).
template <class FV, class FS>
Status unary_exp(KernelContext& c, FV fv, FS fs) {
  const TensorView& x = c.in[0];
  TensorView& out = c.out[0];
  if (x.dtype == DType::bf16) {
    unary_bf16(c, [&](const float* xf, float* yf, int64_t n) { map_f32(xf, yf, n, fv); });
    return ok_status();
  }
  if (x.dtype != DType::f32) return unary(c, fs);
  LJ_CHECK(out.dtype == DType::f32 && x.numel() == out.numel());
  const float* in = x.as<float>();
  float* o = out.as<float>();
  parallel_for(c.threads, x.numel(), kPointwiseGrain,
               [&](int64_t b, int64_t e) { map_f32(in + b, o + b, e - b, fv); });
  return ok_status();
}

Status neg_forward(KernelContext& c) {
  return unary(c, [](auto x) { return -x; });
}
Status exp_forward(KernelContext& c) {
  return unary_exp(
      c, [](auto v) { return simd::exp_vec<float>(v); }, [](auto x) { return std::exp(x); });
}
Status log_forward(KernelContext& c) {
  return unary(c, [](auto x) { return std::log(x); });
}
Status sqrt_forward(KernelContext& c) {
  return unary(c, [](auto x) { return std::sqrt(x); });
}
Status rsqrt_forward(KernelContext& c) {
  return unary(c, [](auto x) { return decltype(x){1} / std::sqrt(x); });
}
Status reciprocal_forward(KernelContext& c) {
  return unary(c, [](auto x) { return decltype(x){1} / x; });
}
Status square_forward(KernelContext& c) {
  return unary(c, [](auto x) { return x * x; });
}
// x * sigmoid(x) = x / (1 + exp(-x)); exp overflowing to inf gives -0, the right limit.
Status silu_forward(KernelContext& c) {
  return unary_exp(
      c, [](auto v) { return v / (1.0f + simd::exp_vec<float>(-v)); },
      [](auto x) { return x / (1.0 + std::exp(-x)); });
}
Status sigmoid_forward(KernelContext& c) {
  return unary_exp(
      c, [](auto v) { return 1.0f / (1.0f + simd::exp_vec<float>(-v)); },
      [](auto x) { return 1.0 / (1.0 + std::exp(-x)); });
}
Status tanh_forward(KernelContext& c) {
  return unary(c, [](auto x) { return std::tanh(x); });
}

// The exponents with an exact cheaper form get it (x * x and 1 / x are what pow rounds to).
Status pow_scalar_forward(KernelContext& c) {
  const double e = c.attrs().f("exponent");
  if (e == 1.0) return unary(c, [](auto x) { return x; });
  if (e == 2.0) return unary(c, [](auto x) { return x * x; });
  if (e == -1.0) return unary(c, [](auto x) { return decltype(x){1} / x; });
  return unary(c, [e](auto x) { return std::pow(x, static_cast<decltype(x)>(e)); });
}

// Any dtype to any dtype, by convert<> (cpu_util.h): float -> int truncates toward zero.
Status cast_forward(KernelContext& c) {
  const TensorView& x = c.in[0];
  TensorView& out = c.out[0];
  LJ_CHECK(x.numel() == out.numel());
  if (x.dtype == out.dtype) {
    parallel_copy(c.threads, out.data, x.data, x.bytes());
    return ok_status();
  }
  // The casts of mixed precision (passes/autocast), in vectorised rows.
  if (x.dtype == DType::f32 && out.dtype == DType::bf16) {
    parallel_for(c.threads, x.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
      f32_to_bf16_row(x.as<float>() + b, out.as<uint16_t>() + b, e - b);
    });
    return ok_status();
  }
  if (x.dtype == DType::bf16 && out.dtype == DType::f32) {
    parallel_for(c.threads, x.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
      bf16_to_f32_row(x.as<uint16_t>() + b, out.as<float>() + b, e - b);
    });
    return ok_status();
  }
  dispatch_all(x.dtype, [&](auto from) {
    dispatch_all(out.dtype, [&](auto to) {
      using S = decltype(from);
      using D = decltype(to);
      const S* in = x.as<S>();
      D* o = out.as<D>();
      parallel_for(c.threads, x.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = convert<D>(in[i]);
      });
    });
  });
  return ok_status();
}

// ---- Binary ----

// out = f(a, b) broadcast; In is the operands' type, Out the output's.
template <class In, class Out, class Fn>
void binary_apply(KernelContext& c, Fn f) {
  const TensorView& a = c.in[0];
  const TensorView& b = c.in[1];
  TensorView& out = c.out[0];
  const BroadcastPlan<2> plan(out.dims, {&a.dims, &b.dims});
  const int64_t sa = plan.inner_stride(0);
  const int64_t sb = plan.inner_stride(1);
  const In* pa = a.as<In>();
  const In* pb = b.as<In>();
  Out* po = out.as<Out>();
  parallel_for(c.threads, plan.numel(), kPointwiseGrain, [&](int64_t begin, int64_t end) {
    plan.for_rows(begin, end, [&](int64_t oo, const BroadcastPlan<2>::Offsets& io, int64_t n) {
      const In* x = pa + io[0];
      const In* y = pb + io[1];
      Out* z = po + oo;
      if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
      } else if (sa == 1) {
        const In yv = *y;
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], yv);
      } else if (sb == 1) {
        const In xv = *x;
        for (int64_t i = 0; i < n; ++i) z[i] = f(xv, y[i]);
      } else {
        const Out v = f(*x, *y);
        for (int64_t i = 0; i < n; ++i) z[i] = v;
      }
    });
  });
}

// binary_apply for bf16 operands and output: each row in f32 blocks, f on float, rounded once.
template <class Fn>
void binary_bf16(KernelContext& c, Fn f) {
  const TensorView& a = c.in[0];
  const TensorView& b = c.in[1];
  TensorView& out = c.out[0];
  const BroadcastPlan<2> plan(out.dims, {&a.dims, &b.dims});
  const int64_t sa = plan.inner_stride(0);
  const int64_t sb = plan.inner_stride(1);
  const auto* pa = a.as<uint16_t>();
  const auto* pb = b.as<uint16_t>();
  auto* po = out.as<uint16_t>();
  parallel_for(c.threads, plan.numel(), kPointwiseGrain, [&](int64_t begin, int64_t end) {
    float xf[kBf16Block], yf[kBf16Block], zf[kBf16Block];
    plan.for_rows(begin, end, [&](int64_t oo, const BroadcastPlan<2>::Offsets& io, int64_t n) {
      for (int64_t j = 0; j < n; j += kBf16Block) {
        const int64_t m = std::min(kBf16Block, n - j);
        if (sa == 1) {
          bf16_to_f32_row(pa + io[0] + j, xf, m);
        } else {
          std::fill(xf, xf + m, bf16_to_f32(pa[io[0]]));
        }
        if (sb == 1) {
          bf16_to_f32_row(pb + io[1] + j, yf, m);
        } else {
          std::fill(yf, yf + m, bf16_to_f32(pb[io[1]]));
        }
        for (int64_t i = 0; i < m; ++i) zf[i] = f(xf[i], yf[i]);
        f32_to_bf16_row(zf, po + oo + j, m);
      }
    });
  });
}

template <class Fn>
Status arith(KernelContext& c, Fn f) {
  LJ_CHECK(c.in[0].dtype == c.in[1].dtype && c.in[0].dtype == c.out[0].dtype);
  if (c.in[0].dtype == DType::bf16) {
    binary_bf16(c, f);
    return ok_status();
  }
  dispatch_float(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    binary_apply<T, T>(c, f);
  });
  return ok_status();
}

template <class Fn>
Status compare(KernelContext& c, Fn f) {
  LJ_CHECK(c.in[0].dtype == c.in[1].dtype && c.out[0].dtype == DType::u8);
  dispatch_real(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    binary_apply<T, uint8_t>(c, f);
  });
  return ok_status();
}

Status add_forward(KernelContext& c) {
  return arith(c, [](auto x, auto y) { return x + y; });
}
Status sub_forward(KernelContext& c) {
  return arith(c, [](auto x, auto y) { return x - y; });
}
Status mul_forward(KernelContext& c) {
  return arith(c, [](auto x, auto y) { return x * y; });
}
Status div_forward(KernelContext& c) {
  return arith(c, [](auto x, auto y) { return x / y; });
}
Status eq_forward(KernelContext& c) {
  return compare(c, [](auto x, auto y) { return static_cast<uint8_t>(x == y); });
}
Status lt_forward(KernelContext& c) {
  return compare(c, [](auto x, auto y) { return static_cast<uint8_t>(x < y); });
}
Status gt_forward(KernelContext& c) {
  return compare(c, [](auto x, auto y) { return static_cast<uint8_t>(x > y); });
}

// where(cond u8, a, b): a where cond != 0, else b; out has a's dtype.
Status where_forward(KernelContext& c) {
  const TensorView& cond = c.in[0];
  const TensorView& a = c.in[1];
  const TensorView& b = c.in[2];
  TensorView& out = c.out[0];
  LJ_CHECK(cond.dtype == DType::u8 && a.dtype == b.dtype && a.dtype == out.dtype);
  const BroadcastPlan<3> plan(out.dims, {&cond.dims, &a.dims, &b.dims});
  const int64_t sc = plan.inner_stride(0);
  const int64_t sa = plan.inner_stride(1);
  const int64_t sb = plan.inner_stride(2);
  dispatch_real(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const uint8_t* pc = cond.as<uint8_t>();
    const T* pa = a.as<T>();
    const T* pb = b.as<T>();
    T* po = out.as<T>();
    parallel_for(c.threads, plan.numel(), kPointwiseGrain, [&](int64_t begin, int64_t end) {
      plan.for_rows(begin, end, [&](int64_t oo, const BroadcastPlan<3>::Offsets& io, int64_t n) {
        const uint8_t* m = pc + io[0];
        const T* x = pa + io[1];
        const T* y = pb + io[2];
        T* z = po + oo;
        if (sc == 1 && sa == 1 && sb == 1) {
          for (int64_t i = 0; i < n; ++i) z[i] = m[i] ? x[i] : y[i];
        } else if (sc == 1 && sa == 0 && sb == 0) {  // masked fill
          const T xv = *x;
          const T yv = *y;
          for (int64_t i = 0; i < n; ++i) z[i] = m[i] ? xv : yv;
        } else {
          for (int64_t i = 0; i < n; ++i) z[i] = m[i * sc] ? x[i * sa] : y[i * sb];
        }
      });
    });
  });
  return ok_status();
}

}  // namespace

void register_elementwise(KernelTable& t) {
  t[Op::neg] = neg_forward;
  t[Op::exp] = exp_forward;
  t[Op::log] = log_forward;
  t[Op::sqrt] = sqrt_forward;
  t[Op::rsqrt] = rsqrt_forward;
  t[Op::reciprocal] = reciprocal_forward;
  t[Op::square] = square_forward;
  t[Op::silu] = silu_forward;
  t[Op::sigmoid] = sigmoid_forward;
  t[Op::tanh] = tanh_forward;
  t[Op::pow_scalar] = pow_scalar_forward;
  t[Op::cast] = cast_forward;
  t[Op::add] = add_forward;
  t[Op::sub] = sub_forward;
  t[Op::mul] = mul_forward;
  t[Op::div] = div_forward;
  t[Op::eq] = eq_forward;
  t[Op::lt] = lt_forward;
  t[Op::gt] = gt_forward;
  t[Op::where] = where_forward;
  // Take bf16 themselves (f16 is widened by widen.cc).
  for (Op op :
       {Op::cast, Op::neg, Op::exp, Op::log, Op::sqrt, Op::rsqrt, Op::reciprocal, Op::square,
        Op::silu, Op::sigmoid, Op::tanh, Op::pow_scalar, Op::add, Op::sub, Op::mul, Op::div}) {
    t.bf16[static_cast<int>(op)] = true;
  }
}

}  // namespace lj::cpu
