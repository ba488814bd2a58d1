// Helpers private to the CPU kernels: a static-partition parallel loop, dtype dispatch, element
// conversion between every pair of dtypes, and numpy-broadcast iteration over an output.
//
// Invariants every kernel relies on:
//  - parallel_for splits [0, n) into at most `threads` contiguous chunks, one per OpenMP thread
//    (schedule(static)); a kernel that reduces must make its order depend on shapes only, so the
//    chunking never changes a result.
//  - BroadcastPlan coalesces dims, so an equal-shape op is one flat row, "b along the last dims"
//    (B, T, C) + (C) is rows of C, and a scalar operand has inner stride 0.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/simd.h"
#include "backends/kernel.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace lj::cpu {

// ---- Threads ----

// Below this many elements per thread a cheap pointwise loop is not worth a fork.
inline constexpr int64_t kPointwiseGrain = 1 << 14;
// Most dims a kernel's index helpers handle (graphs use rank <= 5).
inline constexpr int kMaxRank = 12;

// Calls fn(begin, end) on contiguous chunks covering [0, n): serially when n < 2 * grain,
// otherwise on min(threads, n / grain) OpenMP threads with one equal chunk each.
template <class Fn>
void parallel_for(int threads, int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  const int64_t nt = std::min<int64_t>(std::max(threads, 1), n / std::max<int64_t>(grain, 1));
  if (nt <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  const int num_threads = static_cast<int>(nt);
#pragma omp parallel for schedule(static) num_threads(num_threads)
  for (int64_t t = 0; t < nt; ++t) fn(n * t / nt, n * (t + 1) / nt);
}

// Copies `bytes` from src to dst (non-overlapping), split across threads when large.
inline void parallel_copy(int threads, void* dst, const void* src, size_t bytes) {
  parallel_for(threads, static_cast<int64_t>(bytes), int64_t{1} << 20, [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b,
                static_cast<size_t>(e - b));
  });
}

// ---- Dtypes ----

// Storage types of the 16-bit floats; kernels compute in f32 and convert at the edges.
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

template <class T>
inline constexpr bool kIsHalf = std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>;

// Element `s` stored as D: 16-bit floats round to nearest even through f32 (a double is rounded to
// f32 first, as PyTorch does); float -> int truncates toward zero, NaN gives 0 and values past the
// integer range saturate (C++ leaves those undefined); int -> int wraps as C++20 defines.
template <class D, class S>
inline D convert(S s) {
  if constexpr (std::is_same_v<S, bf16_t>) {
    return convert<D>(bf16_to_f32(s.bits));
  } else if constexpr (std::is_same_v<S, f16_t>) {
    return convert<D>(f16_to_f32(s.bits));
  } else if constexpr (std::is_same_v<D, bf16_t>) {
    return bf16_t{f32_to_bf16(static_cast<float>(s))};
  } else if constexpr (std::is_same_v<D, f16_t>) {
    return f16_t{f32_to_f16(static_cast<float>(s))};
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (s != s) return D{0};
    const S t = std::trunc(s);
    if (t <= static_cast<S>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    // max() + 1 is a power of two, exact in S; anything at or past it saturates.
    if (t >= static_cast<S>(std::numeric_limits<D>::max()) + S{1}) {
      return std::numeric_limits<D>::max();
    }
    return static_cast<D>(t);
  } else {
    return static_cast<D>(s);
  }
}

// Rows of bf16 <-> f32, the conversions every 16-bit path does at its edges. Branch-free so the
// compiler vectorises them; bitwise what f32_to_bf16 / bf16_to_f32 (core/dtype.h) give.
inline void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &u, 4);
  }
}
inline void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;
    y[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

// ---- Dtype dispatch: one helper, dispatch_in<Ts...>, every kernel's run of cases ----

// The dtype of each C++ type the CPU kernels compute in (no other type has one).
template <class T>
struct DTypeOf;
#define LJ_CPU_DTYPE_OF(T, D)                \
  template <>                                \
  struct DTypeOf<T> {                        \
    static constexpr DType value = DType::D; \
  };
LJ_CPU_DTYPE_OF(float, f32)
LJ_CPU_DTYPE_OF(double, f64)
LJ_CPU_DTYPE_OF(bf16_t, bf16)
LJ_CPU_DTYPE_OF(f16_t, f16)
LJ_CPU_DTYPE_OF(int32_t, i32)
LJ_CPU_DTYPE_OF(int64_t, i64)
LJ_CPU_DTYPE_OF(uint8_t, u8)
#undef LJ_CPU_DTYPE_OF

// Calls fn(T{}) with T the one of Ts whose dtype is `t`, and returns what it returns; a dtype
// outside Ts stops with `refusal` and the dtype's name (an invariant: graphs are type-checked).
template <class T, class... Ts, class Fn>
decltype(auto) dispatch_in(DType t, const char* refusal, Fn&& fn) {
  if (t == DTypeOf<T>::value) return fn(T{});
  if constexpr (sizeof...(Ts) > 0) {
    return dispatch_in<Ts...>(t, refusal, fn);
  } else {
    LJ_CHECK(false) << refusal << dtype_name(t);
    __builtin_unreachable();
  }
}

// Every dtype: float, double, bf16_t, f16_t, int32_t, int64_t, uint8_t.
template <class Fn>
decltype(auto) dispatch_all(DType t, Fn&& fn) {
  return dispatch_in<float, double, bf16_t, f16_t, int32_t, int64_t, uint8_t>(t, "bad dtype ", fn);
}

// f32 and f64 only: the compute dtypes of float kernels.
template <class Fn>
decltype(auto) dispatch_float(DType t, Fn&& fn) {
  return dispatch_in<float, double>(t, "kernel supports f32 and f64, got ", fn);
}

// The dtypes that compare and select: f32, f64, i32, i64, u8.
template <class Fn>
decltype(auto) dispatch_real(DType t, Fn&& fn) {
  return dispatch_in<float, double, int32_t, int64_t, uint8_t>(t, "kernel does not support ", fn);
}

// Index ids (gather, scatter_add): i32 or i64.
template <class Fn>
decltype(auto) dispatch_index(DType t, Fn&& fn) {
  return dispatch_in<int32_t, int64_t>(t, "ids must be i32 or i64, got ", fn);
}

// An unsigned integer type of `bytes` bytes: data movement copies elements by size only.
template <class Fn>
decltype(auto) dispatch_size(int bytes, Fn&& fn) {
  switch (bytes) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
    default:
      break;
  }
  LJ_CHECK(false) << "bad element size " << bytes;
  __builtin_unreachable();
}

// ---- Math ----

// y[i] = f(x[i]) for i < n, f taking and returning simd::V<float> (8 lanes). The tail goes
// through one zero-padded vector, so every element sees the same instructions wherever it sits.
// For the transcendental ops (exp through simd::exp_vec), which libm cannot vectorise.
template <class F>
inline void map_f32(const float* x, float* y, int64_t n, F f) {
  constexpr int W = simd::kWidth<float>;
  int64_t i = 0;
  for (; i + W <= n; i += W) simd::store(y + i, f(simd::load(x + i)));
  if (i < n) {
    float in[W] = {}, out[W];
    std::memcpy(in, x + i, static_cast<size_t>(n - i) * sizeof(float));
    simd::store(out, f(simd::load(in)));
    std::memcpy(y + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// ---- Shapes ----

inline int norm_axis(int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  LJ_CHECK(a >= 0 && a < std::max(rank, 1)) << "axis " << axis << " out of range for rank " << rank;
  return static_cast<int>(a);
}

inline int64_t prod(const std::vector<int64_t>& dims, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= dims[static_cast<size_t>(i)];
  return p;
}

// An output of some dims and N inputs broadcast to it (numpy rules: right-aligned, a dim of 1
// repeats). Dims of size 1 are dropped and neighbours that are contiguous in every operand are
// merged, so the innermost dim is as long as possible and every input's inner stride is 0 or 1.
template <int N>
class BroadcastPlan {
 public:
  using Offsets = std::array<int64_t, N>;

  BroadcastPlan(const std::vector<int64_t>& out,
                const std::array<const std::vector<int64_t>*, N>& in)
      : numel_(numel_of(out)) {
    const int r = static_cast<int>(out.size());
    std::vector<Offsets> full(out.size(), Offsets{});
    for (int k = 0; k < N; ++k) {
      const std::vector<int64_t>& d = *in[k];
      const int lead = r - static_cast<int>(d.size());
      LJ_CHECK(lead >= 0) << "cannot broadcast " << dims_to_string(d) << " to "
                          << dims_to_string(out);
      int64_t stride = 1;
      for (int i = r - 1; i >= lead; --i) {
        const int64_t dj = d[i - lead];
        LJ_CHECK(dj == out[i] || dj == 1)
            << "cannot broadcast " << dims_to_string(d) << " to " << dims_to_string(out);
        full[i][k] = dj == 1 ? 0 : stride;
        stride *= dj;
      }
    }
    // Walk innermost first, merging each dim into the group inside it when every operand is
    // contiguous across the pair; reversed at the end.
    for (int i = r - 1; i >= 0; --i) {
      if (out[i] == 1) continue;
      bool merge = !dims_.empty();
      for (int k = 0; k < N && merge; ++k) merge = full[i][k] == strides_.back()[k] * dims_.back();
      if (merge) {
        dims_.back() *= out[i];
      } else {
        dims_.push_back(out[i]);
        strides_.push_back(full[i]);
      }
    }
    if (dims_.empty()) {
      dims_.push_back(1);
      strides_.push_back(Offsets{});
    }
    std::reverse(dims_.begin(), dims_.end());
    std::reverse(strides_.begin(), strides_.end());
    LJ_CHECK(static_cast<int>(dims_.size()) <= kMaxRank) << "rank above " << kMaxRank;
  }

  int64_t numel() const { return numel_; }
  // Element stride of input k along the innermost (row) dim: 0 or 1.
  int64_t inner_stride(int k) const { return strides_.back()[k]; }

  // Calls row(out_offset, in_offsets, len) for the maximal runs along the innermost dim that
  // cover output elements [begin, end), in order; in_offsets[k] is input k's first element.
  template <class Row>
  void for_rows(int64_t begin, int64_t end, Row&& row) const {
    if (begin >= end) return;
    const int r = static_cast<int>(dims_.size());
    const int64_t inner = dims_.back();
    std::array<int64_t, kMaxRank> idx{};
    Offsets off{};
    int64_t rest = begin / inner;
    for (int d = r - 2; d >= 0; --d) {
      idx[d] = rest % dims_[d];
      rest /= dims_[d];
      for (int k = 0; k < N; ++k) off[k] += idx[d] * strides_[d][k];
    }
    int64_t pos = begin % inner;
    for (int64_t cur = begin; cur < end;) {
      const int64_t len = std::min(inner - pos, end - cur);
      Offsets at = off;
      for (int k = 0; k < N; ++k) at[k] += pos * inner_stride(k);
      row(cur, at, len);
      cur += len;
      pos = 0;
      // Odometer over the outer dims.
      for (int d = r - 2; d >= 0; --d) {
        if (++idx[d] < dims_[d]) {
          for (int k = 0; k < N; ++k) off[k] += strides_[d][k];
          break;
        }
        idx[d] = 0;
        for (int k = 0; k < N; ++k) off[k] -= (dims_[d] - 1) * strides_[d][k];
      }
    }
  }

 private:
  int64_t numel_ = 0;
  std::vector<int64_t> dims_;     // coalesced output dims, outermost first
  std::vector<Offsets> strides_;  // per coalesced dim, each input's element stride
};

}  // namespace lj::cpu
