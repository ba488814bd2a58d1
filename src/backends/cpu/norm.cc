// CPU kernels of the fused RMSNorm ops (f32 and f64; also bf16, rows widened to f32):
//
//   rms_norm(x (N, C), w (C)) -> y (N, C), rstd (N, 1)        (leading dims flattened into N)
//   add_rms_norm(x, r, w) -> s = x + r, y = rms_norm(s, w), rstd
//   rms_norm_backward(dy, x, w, rstd [, dres]) -> dx (N, C), dw (C)
//       dx = rstd * w * dy - x * (rstd^3 / C) * sum_c(dy * w * x)  (+ dres)
//       dw = sum over rows of dy * x * rstd
//
// The forward rounds exactly as the primitive subgraph of models/llama.cc does (square -> mean
// -> add eps -> rsqrt -> mul -> mul, each rounded to the dtype): the squares are summed in f64 in
// reduce.cc's order for a mean over the last dim (16 interleaved lanes, a fixed tree, the tail;
// blocks of kRowBlock elements added in order), so fusing changes no forward bit.
//
// Rows run in parallel (static partition). Every sum has an order fixed by the shapes alone, so
// the results do not depend on the thread count: the per-row sums accumulate in f64 lanes, and
// dw is summed in f64 over fixed blocks of kRowsPerBlock rows (one partial row of C per block,
// from the kernel's workspace), whose partials are then added in block order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

constexpr int64_t kRowBlock = 1 << 14;  // as reduce.cc: elements per partial of a row sum
constexpr int kLanes = 16;              // as reduce.cc
constexpr int64_t kRowsPerBlock = 64;   // rows per dw partial in the backward

// sum_j f(j) over [0, n), f giving a double, in reduce.cc's contiguous order.
template <class F>
double lane_sum(int64_t n, F f) {
  double total = 0;
  for (int64_t b = 0; b < n; b += kRowBlock) {
    const int64_t len = std::min(kRowBlock, n - b);
    double lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= len; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] += f(b + i + j);
    }
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
    }
    double acc = lanes[0];
    for (; i < len; ++i) acc += f(b + i);
    total = b == 0 ? acc : total + acc;
  }
  return total;
}

// One row: rstd = 1 / sqrt(T(mean(x^2)) + T(eps)), y = (x * rstd) * w, each step rounded to T.
template <class T>
T norm_row(const T* x, const T* w, T* y, int64_t n, T eps) {
  const double ss = lane_sum(n, [x](int64_t j) {
    const T sq = x[j] * x[j];
    return static_cast<double>(sq);
  });
  const T var = static_cast<T>(ss / static_cast<double>(n));
  const T rstd = T(1) / std::sqrt(var + eps);
  for (int64_t j = 0; j < n; ++j) {
    const T xr = x[j] * rstd;
    y[j] = xr * w[j];
  }
  return rstd;
}

int64_t row_grain(int64_t c) {
  return std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(c, 1));
}

template <class T>
void rms_norm_impl(KernelContext& c) {
  const TensorView& x = c.in[0];
  const int64_t cols = x.dim(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const T* xp = x.as<T>();
  const T* w = c.in[1].as<T>();
  T* y = c.out[0].as<T>();
  T* rstd = c.out[1].as<T>();
  const T eps = static_cast<T>(c.attrs().f("eps"));
  parallel_for(c.threads, rows, row_grain(cols), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) rstd[i] = norm_row(xp + i * cols, w, y + i * cols, cols, eps);
  });
}

template <class T>
void add_rms_norm_impl(KernelContext& c) {
  const TensorView& x = c.in[0];
  const int64_t cols = x.dim(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const T* xp = x.as<T>();
  const T* rp = c.in[1].as<T>();
  const T* w = c.in[2].as<T>();
  T* s = c.out[0].as<T>();
  T* y = c.out[1].as<T>();
  T* rstd = c.out[2].as<T>();
  const T eps = static_cast<T>(c.attrs().f("eps"));
  parallel_for(c.threads, rows, row_grain(cols), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* xi = xp + i * cols;
      const T* ri = rp + i * cols;
      T* si = s + i * cols;
      for (int64_t j = 0; j < cols; ++j) si[j] = xi[j] + ri[j];
      rstd[i] = norm_row(si, w, y + i * cols, cols, eps);
    }
  });
}

// One row of the backward: dx (+ dres) and the row's dw terms added into p (f64), T's arithmetic.
template <class T>
void backward_row(const T* dyi, const T* xi, const T* w, T r, const T* di, T* dxi, double* p,
                  int64_t cols, double inv_c) {
  // sum_c dy * w * x, in f64.
  const double dot = lane_sum(cols, [&](int64_t j) {
    return static_cast<double>(dyi[j] * w[j]) * static_cast<double>(xi[j]);
  });
  const double rd = static_cast<double>(r);
  const T k = static_cast<T>(rd * rd * rd * dot * inv_c);
  if (di != nullptr) {
    for (int64_t j = 0; j < cols; ++j) dxi[j] = (r * (w[j] * dyi[j]) - k * xi[j]) + di[j];
  } else {
    for (int64_t j = 0; j < cols; ++j) dxi[j] = r * (w[j] * dyi[j]) - k * xi[j];
  }
  for (int64_t j = 0; j < cols; ++j) p[j] += static_cast<double>(dyi[j] * (xi[j] * r));
}

// The backward over `rows` rows of `cols`: row(i, p) computes row i, adding its dw terms into
// the block's partial p; then dw[j] = store(j, the partials summed in block order).
template <class Row, class Store>
void backward_rows(KernelContext& c, int64_t rows, int64_t cols, Row row, Store store) {
  const int64_t nblk = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<double> fallback;
  const size_t count = static_cast<size_t>(nblk * cols);
  double* partial = nullptr;
  if (c.workspace != nullptr) {
    partial = static_cast<double*>(c.workspace->get(count * sizeof(double)));
  } else {
    fallback.assign(count, 0.0);
    partial = fallback.data();
  }
  parallel_for(c.threads, nblk, std::max<int64_t>(1, row_grain(cols) / kRowsPerBlock),
               [&](int64_t b, int64_t e) {
                 for (int64_t blk = b; blk < e; ++blk) {
                   double* p = partial + blk * cols;
                   std::fill(p, p + cols, 0.0);
                   const int64_t r1 = std::min(rows, (blk + 1) * kRowsPerBlock);
                   for (int64_t i = blk * kRowsPerBlock; i < r1; ++i) row(i, p);
                 }
               });
  // dw = the partials summed in block order, into the first partial row, then rounded once.
  parallel_for(c.threads, cols, kPointwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t blk = 1; blk < nblk; ++blk) {
      const double* p = partial + blk * cols;
      for (int64_t j = b; j < e; ++j) partial[j] += p[j];
    }
    for (int64_t j = b; j < e; ++j) store(j, partial[j]);
  });
}

template <class T>
void rms_norm_backward_impl(KernelContext& c) {
  const TensorView& x = c.in[1];
  const int64_t cols = x.dim(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const T* dy = c.in[0].as<T>();
  const T* xp = x.as<T>();
  const T* w = c.in[2].as<T>();
  const T* rstd = c.in[3].as<T>();
  const T* dres = c.in.size() == 5 ? c.in[4].as<T>() : nullptr;
  T* dx = c.out[0].as<T>();
  T* dw = c.out[1].as<T>();
  if (rows == 0) {
    std::fill(dw, dw + cols, T(0));
    return;
  }
  const double inv_c = 1.0 / static_cast<double>(cols);
  backward_rows(
      c, rows, cols,
      [&](int64_t i, double* p) {
        backward_row(dy + i * cols, xp + i * cols, w, rstd[i],
                     dres != nullptr ? dres + i * cols : nullptr, dx + i * cols, p, cols, inv_c);
      },
      [&](int64_t j, double v) { dw[j] = static_cast<T>(v); });
}

// The backward on bf16 (mixed precision): each row's dy, x (and dres) widened to f32 and run
// through the f32 row, dx rounded once per row (or kept in f32); dw rounded f64 -> f32 (-> bf16).
// Bitwise what the f32 kernel gives on the widened tensors, rounded (widen.cc's path, without its
// whole-tensor f32 copies).
void rms_norm_backward_bf16(KernelContext& c) {
  const TensorView& x = c.in[1];
  const int64_t cols = x.dim(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const auto* dy = c.in[0].as<uint16_t>();
  const auto* xp = x.as<uint16_t>();
  const auto* rstd = c.in[3].as<uint16_t>();
  const auto* dres = c.in.size() == 5 ? c.in[4].as<uint16_t>() : nullptr;
  // dx and dw are bf16 or f32 each (master weights take an f32 dw).
  const bool dx_f32 = c.out[0].dtype == DType::f32, dw_f32 = c.out[1].dtype == DType::f32;
  const auto store_dw = [&](int64_t j, double v) {
    const float f = static_cast<float>(v);
    if (dw_f32) {
      c.out[1].as<float>()[j] = f;
    } else {
      c.out[1].as<uint16_t>()[j] = f32_to_bf16(f);
    }
  };
  if (rows == 0) {
    for (int64_t j = 0; j < cols; ++j) store_dw(j, 0.0);
    return;
  }
  std::vector<float> w(static_cast<size_t>(cols));  // (C)
  bf16_to_f32_row(c.in[2].as<uint16_t>(), w.data(), cols);
  const double inv_c = 1.0 / static_cast<double>(cols);
  const size_t n = static_cast<size_t>(cols);
  backward_rows(
      c, rows, cols,
      [&](int64_t i, double* p) {
        thread_local std::vector<float> buf;  // dy, x, dres, dx rows of (C)
        if (buf.size() < 4 * n) buf.resize(4 * n);
        float *dyf = buf.data(), *xf = dyf + n, *df = xf + n, *dxf = df + n;
        bf16_to_f32_row(dy + i * cols, dyf, cols);
        bf16_to_f32_row(xp + i * cols, xf, cols);
        if (dres != nullptr) bf16_to_f32_row(dres + i * cols, df, cols);
        float* out = dx_f32 ? c.out[0].as<float>() + i * cols : dxf;
        backward_row(dyf, xf, w.data(), bf16_to_f32(rstd[i]), dres != nullptr ? df : nullptr, out,
                     p, cols, inv_c);
        if (!dx_f32) f32_to_bf16_row(dxf, c.out[0].as<uint16_t>() + i * cols, cols);
      },
      store_dw);
}

// rms_norm / add_rms_norm on bf16 (mixed precision): each row is loaded into f32 and goes
// through the f32 norm_row (statistics in f64 lanes, as in f32), then y, rstd (and s) are
// rounded once: the f32 kernel's results on the same values, rounded. `residual`: add_rms_norm.
void rms_norm_bf16(KernelContext& c, bool residual) {
  const TensorView& x = c.in[0];
  const int64_t cols = x.dim(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const auto* xp = x.as<uint16_t>();
  const auto* rp = residual ? c.in[1].as<uint16_t>() : nullptr;
  const TensorView& wv = c.in[residual ? 2 : 1];
  const size_t k = residual ? 1 : 0;  // outputs: [s,] y, rstd
  auto* s = residual ? c.out[0].as<uint16_t>() : nullptr;
  auto* y = c.out[k].as<uint16_t>();
  auto* rstd = c.out[k + 1].as<uint16_t>();
  const float eps = static_cast<float>(c.attrs().f("eps"));
  std::vector<float> w(static_cast<size_t>(cols));  // (C)
  bf16_to_f32_row(wv.as<uint16_t>(), w.data(), cols);
  parallel_for(c.threads, rows, row_grain(cols), [&](int64_t b, int64_t e) {
    std::vector<float> xf(static_cast<size_t>(cols)), rf(static_cast<size_t>(cols)),
        yf(static_cast<size_t>(cols));  // (C) each
    for (int64_t i = b; i < e; ++i) {
      bf16_to_f32_row(xp + i * cols, xf.data(), cols);
      if (residual) {
        bf16_to_f32_row(rp + i * cols, rf.data(), cols);
        for (int64_t j = 0; j < cols; ++j) xf[static_cast<size_t>(j)] += rf[static_cast<size_t>(j)];
        f32_to_bf16_row(xf.data(), s + i * cols, cols);
      }
      const float r = norm_row(xf.data(), w.data(), yf.data(), cols, eps);
      f32_to_bf16_row(yf.data(), y + i * cols, cols);
      rstd[i] = f32_to_bf16(r);
    }
  });
}

Status rms_norm_forward(KernelContext& c) {
  if (c.in[0].dtype == DType::bf16) {
    rms_norm_bf16(c, /*residual=*/false);
    return ok_status();
  }
  dispatch_float(c.in[0].dtype, [&](auto tag) { rms_norm_impl<decltype(tag)>(c); });
  return ok_status();
}

Status add_rms_norm_forward(KernelContext& c) {
  if (c.in[0].dtype == DType::bf16) {
    rms_norm_bf16(c, /*residual=*/true);
    return ok_status();
  }
  dispatch_float(c.in[0].dtype, [&](auto tag) { add_rms_norm_impl<decltype(tag)>(c); });
  return ok_status();
}

Status rms_norm_backward(KernelContext& c) {
  if (c.in[1].dtype == DType::bf16) {
    for (const TensorView& v : c.in) {
      if (v.dtype != DType::bf16)
        return invalid_argument("rms_norm_backward: bf16 x with a " +
                                std::string(dtype_name(v.dtype)) + " operand");
    }
    for (const TensorView& v : c.out) {
      if (v.dtype != DType::bf16 && v.dtype != DType::f32)
        return invalid_argument("rms_norm_backward: bf16 x with a " +
                                std::string(dtype_name(v.dtype)) + " output");
    }
    rms_norm_backward_bf16(c);
    return ok_status();
  }
  dispatch_float(c.in[1].dtype, [&](auto tag) { rms_norm_backward_impl<decltype(tag)>(c); });
  return ok_status();
}

}  // namespace

void register_norm(KernelTable& t) {
  t[Op::rms_norm] = rms_norm_forward;
  t[Op::add_rms_norm] = add_rms_norm_forward;
  t[Op::rms_norm_backward] = rms_norm_backward;
  t.bf16[static_cast<int>(Op::rms_norm)] = true;
  t.bf16[static_cast<int>(Op::rms_norm_backward)] = true;
  t.bf16[static_cast<int>(Op::add_rms_norm)] = true;
}

}  // namespace lj::cpu
