// CPU kernel of the fused rotary embedding (f32 and f64):
//
//   rope(x (..., T, D), cos (T, D), sin (T, D)) -> y (..., T, D), h = D / 2, per row of D:
//     forward:  y[j] = x[j] cos[j] - x[j + h] sin[j]           j <  h
//               y[j] = x[j] cos[j] + x[j - h] sin[j]           j >= h
//               (x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1), as HF)
//     inverse:  y[j] = x[j] cos[j] + x[j + h] sin[j + h]       j <  h
//               y[j] = x[j] cos[j] - x[j - h] sin[j - h]       j >= h
//               (x * cos + rotate_half^T(x * sin): the VJP of the forward, and vice versa)
//
// Rows of D run in parallel, each a pure function of its inputs (no reduction), so the thread
// count never changes a result. Both halves are contiguous loops that vectorise.
#include <algorithm>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

template <class T>
void rope_impl(KernelContext& c) {
  const TensorView& x = c.in[0];
  const int64_t d = x.dim(-1), t = x.dim(-2), h = d / 2;
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const T* xp = x.as<T>();
  const T* cos = c.in[1].as<T>();
  const T* sin = c.in[2].as<T>();
  T* y = c.out[0].as<T>();
  const bool inverse = c.attrs().b("inverse");
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(d, 1));
  parallel_for(c.threads, rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* xi = xp + i * d;
      const T* ci = cos + (i % t) * d;
      const T* si = sin + (i % t) * d;
      T* yi = y + i * d;
      if (!inverse) {
        for (int64_t j = 0; j < h; ++j) yi[j] = xi[j] * ci[j] + (-xi[j + h]) * si[j];
        for (int64_t j = h; j < d; ++j) yi[j] = xi[j] * ci[j] + xi[j - h] * si[j];
      } else {
        for (int64_t j = 0; j < h; ++j) yi[j] = xi[j] * ci[j] + xi[j + h] * si[j + h];
        for (int64_t j = h; j < d; ++j) yi[j] = xi[j] * ci[j] + -(xi[j - h] * si[j - h]);
      }
    }
  });
}

Status rope_forward(KernelContext& c) {
  dispatch_float(c.in[0].dtype, [&](auto tag) { rope_impl<decltype(tag)>(c); });
  return ok_status();
}

}  // namespace

void register_rope(KernelTable& t) {
  t[Op::rope] = rope_forward;
}

}  // namespace lj::cpu
