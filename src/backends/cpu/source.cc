// CPU kernels of the source ops: constant, iota, random_normal, random_uniform. They have no
// inputs; the output's concrete dims come from the executor (c.out[0].dims), the attrs give the
// value, axis, distribution and seed.
//
// The random ops are counter-based: element i is a pure function of (seed, i), so the same seed
// gives the same tensor whatever the thread count or chunking. The generator is the SplitMix64
// stream: key = mix(seed), draw n = mix(key + (n + 1) * golden), where mix is SplitMix64's
// finaliser. Uniforms take the top 53 bits; normals use Box-Muller on the draw pair (2k, 2k + 1),
// element 2k taking the cosine and 2k + 1 the sine. Values are computed in f64 and rounded to the
// output dtype, so a uniform rounded to a narrow dtype may equal `high`.
#include <cmath>
#include <numbers>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
constexpr double kTwoPow53Inv = 1.0 / 9007199254740992.0;  // 2^-53

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Draw n of the stream keyed by `key`.
uint64_t draw(uint64_t key, uint64_t n) {
  return mix64(key + (n + 1) * kGolden);
}

// In [0, 1).
double uniform01(uint64_t bits) {
  return static_cast<double>(bits >> 11) * kTwoPow53Inv;
}
// In (0, 1]: safe under log.
double uniform01_open0(uint64_t bits) {
  return static_cast<double>((bits >> 11) + 1) * kTwoPow53Inv;
}

Status constant_forward(KernelContext& c) {
  TensorView& out = c.out[0];
  const double value = c.attrs().f("value");
  dispatch_all(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = convert<T>(value);
    T* o = out.as<T>();
    parallel_for(c.threads, out.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = v;
    });
  });
  return ok_status();
}

// out viewed as (outer, L, inner) around `axis`: out[o, i, n] = i.
Status iota_forward(KernelContext& c) {
  TensorView& out = c.out[0];
  if (out.numel() == 0) return ok_status();
  const int axis = norm_axis(c.attrs().i("axis"), out.rank());
  const int64_t len = out.rank() == 0 ? 1 : out.dims[axis];
  const int64_t inner = out.rank() == 0 ? 1 : prod(out.dims, axis + 1, out.rank());
  dispatch_all(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    parallel_for(c.threads, out.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = convert<T>((i / inner) % len);
    });
  });
  return ok_status();
}

Status random_uniform_forward(KernelContext& c) {
  TensorView& out = c.out[0];
  LJ_CHECK(is_float(out.dtype)) << "random_uniform: dtype " << dtype_name(out.dtype);
  const uint64_t key = mix64(static_cast<uint64_t>(c.attrs().i("seed")));
  const double low = c.attrs().f("low");
  const double span = c.attrs().f("high") - low;
  dispatch_all(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || kIsHalf<T>) {
      T* o = out.as<T>();
      parallel_for(c.threads, out.numel(), 4096, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          o[i] = convert<T>(low + span * uniform01(draw(key, static_cast<uint64_t>(i))));
        }
      });
    }
  });
  return ok_status();
}

Status random_normal_forward(KernelContext& c) {
  TensorView& out = c.out[0];
  LJ_CHECK(is_float(out.dtype)) << "random_normal: dtype " << dtype_name(out.dtype);
  const uint64_t key = mix64(static_cast<uint64_t>(c.attrs().i("seed")));
  const double mean = c.attrs().f("mean");
  const double stddev = c.attrs().f("std");
  const int64_t n = out.numel();
  dispatch_all(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || kIsHalf<T>) {
      T* o = out.as<T>();
      // Parallel over pairs (2k, 2k + 1), which share one Box-Muller draw.
      parallel_for(c.threads, (n + 1) / 2, 2048, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const auto u = static_cast<uint64_t>(k);
          const double r = std::sqrt(-2.0 * std::log(uniform01_open0(draw(key, 2 * u))));
          const double theta = 2.0 * std::numbers::pi * uniform01(draw(key, 2 * u + 1));
          o[2 * k] = convert<T>(mean + stddev * r * std::cos(theta));
          if (2 * k + 1 < n) o[2 * k + 1] = convert<T>(mean + stddev * r * std::sin(theta));
        }
      });
    }
  });
  return ok_status();
}

}  // namespace

void register_source(KernelTable& t) {
  t[Op::constant] = constant_forward;
  t[Op::iota] = iota_forward;
  t[Op::random_normal] = random_normal_forward;
  t[Op::random_uniform] = random_uniform_forward;
  t.bf16[static_cast<int>(Op::constant)] = true;
  t.bf16[static_cast<int>(Op::iota)] = true;
  t.bf16[static_cast<int>(Op::random_normal)] = true;
  t.bf16[static_cast<int>(Op::random_uniform)] = true;
}

}  // namespace lj::cpu
