// CPU kernels of the mixture-of-experts ops: topk, moe_sort (a counting sort of the routed rows
// by expert), and the grouped GEMM with run-time group sizes and its weight gradient (rows past
// the last group, expert parallelism's padding, give zero rows and no weight gradient). In f32 and
// f64 the threads split the work once per call (the forward's rows across group boundaries, the
// weight gradient's output rows of every group), each piece a single-threaded GEMM (gemm.h); bf16
// operands run each group on gemm_bf16 on every thread, as matmul does. The split depends on the
// group sizes and the thread count only, so results are bitwise reproducible for a given thread
// count. Group sizes are data: a set that sums above the routed rows, or an expert id out of
// range, is a Status, never a wild write.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/gemm.h"

namespace lj::cpu {
namespace {

// x (rows, E) -> indices (rows, k): largest first, equal values in index order.
Status topk_forward(KernelContext& c) {
  const TensorView& x = c.in[0];
  TensorView& out = c.out[0];
  const int64_t e = x.dims.back(), k = out.dims.back();
  const int64_t rows = e == 0 ? 0 : x.numel() / e;
  LJ_CHECK(k <= e && out.dtype == DType::i32);
  int32_t* idx = out.as<int32_t>();
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.as<T>();
    parallel_for(c.threads, rows, 256, [&](int64_t r0, int64_t r1) {
      std::vector<char> taken(static_cast<size_t>(e));
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = src + r * e;
        std::fill(taken.begin(), taken.end(), 0);
        for (int64_t j = 0; j < k; ++j) {
          int64_t best = -1;
          for (int64_t i = 0; i < e; ++i) {
            if (taken[static_cast<size_t>(i)]) continue;
            // NaN ranks above every number, as in torch.topk.
            if (best < 0 || row[i] > row[best] || (row[i] != row[i] && row[best] == row[best]))
              best = i;
          }
          taken[static_cast<size_t>(best)] = 1;
          idx[r * k + j] = static_cast<int32_t>(best);
        }
      }
    });
  });
  return ok_status();
}

// indices (N, k) -> token (N*k), inverse (N*k), group_sizes (E).
Status moe_sort_forward(KernelContext& c) {
  const TensorView& ids = c.in[0];
  const int64_t k = ids.dims[1], rows = ids.numel();
  const int64_t experts = c.attrs().i("experts");
  int32_t* token = c.out[0].as<int32_t>();
  int32_t* inverse = c.out[1].as<int32_t>();
  int32_t* sizes = c.out[2].as<int32_t>();
  return dispatch_index(ids.dtype, [&](auto tag) -> Status {
    using I = decltype(tag);
    const I* id = ids.as<I>();
    std::vector<int64_t> next(static_cast<size_t>(experts) + 1, 0);
    for (int64_t f = 0; f < rows; ++f) {
      if (id[f] < 0 || id[f] >= experts) {
        return out_of_range("moe_sort: expert id " + std::to_string(id[f]) + " at " +
                                std::to_string(f) + " is outside [0, " + std::to_string(experts) +
                                ")",
                            "the router's top-k indices must be below the expert count");
      }
      ++next[static_cast<size_t>(id[f]) + 1];
    }
    for (int64_t e = 0; e < experts; ++e) sizes[e] = static_cast<int32_t>(next[e + 1]);
    for (int64_t e = 0; e < experts; ++e) next[e + 1] += next[e];
    for (int64_t f = 0; f < rows; ++f) {
      const int64_t r = next[static_cast<size_t>(id[f])]++;
      token[r] = static_cast<int32_t>(f / k);
      inverse[f] = static_cast<int32_t>(r);
    }
    return ok_status();
  });
}

// The row offset of each group; a Status when the sizes cover more than `rows` rows (fewer is
// expert parallelism's receive capacity: the rows past the last group are padding).
StatusOr<std::vector<int64_t>> group_offsets(const TensorView& sizes, int64_t rows,
                                             const char* op) {
  std::vector<int64_t> off(static_cast<size_t>(sizes.numel()) + 1, 0);
  Status bad;
  dispatch_index(sizes.dtype, [&](auto tag) {
    using I = decltype(tag);
    const I* s = sizes.as<I>();
    for (int64_t e = 0; e < sizes.numel(); ++e) {
      if (s[e] < 0) bad = out_of_range(std::string(op) + ": a negative group size", "");
      off[static_cast<size_t>(e) + 1] = off[static_cast<size_t>(e)] + static_cast<int64_t>(s[e]);
    }
  });
  LJ_RETURN_IF_ERROR(bad);
  if (off.back() > rows) {
    return out_of_range(std::string(op) + ": group sizes sum to " + std::to_string(off.back()) +
                            ", above the " + std::to_string(rows) + " routed rows",
                        "group_sizes must come from moe_sort of the same routing");
  }
  return off;
}

// One single-threaded GEMM c (m, n) = op(a) (m, k) x op(b) (k, n) with leading dims, called
// inside a parallel region (gemm.h: one thread there).
void gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
              const double* b, int64_t ldb, double* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc, 1);
}

// [lo, hi) of n items for thread `id` of `nt`, boundaries on multiples of `align`.
std::pair<int64_t, int64_t> thread_range(int64_t n, int id, int nt, int64_t align) {
  const int64_t units = (n + align - 1) / align;
  return {std::min(n, units * id / nt * align), std::min(n, units * (id + 1) / nt * align)};
}

// Element `i` of a dense tensor of any dtype, as a byte address.
char* element(const TensorView& v, int64_t i) {
  return static_cast<char*>(v.data) + i * static_cast<int64_t>(dtype_size(v.dtype));
}

// oneDNN builds one primitive per GEMM shape (gemm.cc gemm_bf16), and group sizes change every
// step: one primitive per group size grew the process by 148 MiB and ran 5-16% slower than
// widening (mixtral-h256 bf16, B4 T256). So a group's rows run as chunks of kRowChunk rows, then
// the binary digits of the rest: a shape meets at most 10 row counts. fn(first row, rows).
constexpr int64_t kRowChunk = 512;
template <class Fn>
void for_row_chunks(int64_t m, Fn&& fn) {
  int64_t r = 0;
  for (; m - r >= kRowChunk; r += kRowChunk) fn(r, kRowChunk);
  for (int64_t c = kRowChunk / 2; c >= 1; c /= 2) {
    if (m - r >= c) {
      fn(r, c);
      r += c;
    }
  }
}

// x (R, K), w (E, N, K) [tb] or (E, K, N) -> y (R, N).
Status grouped_matmul_forward(KernelContext& c) {
  const TensorView& x = c.in[0];
  const TensorView& w = c.in[1];
  TensorView& y = c.out[0];
  const bool tb = c.attrs().b("tb");
  const int64_t rows = x.dims[0], kd = x.dims[1], n = y.dims[1], experts = w.dims[0];
  LJ_ASSIGN_OR_RETURN(std::vector<int64_t> off, group_offsets(c.in[2], rows, "grouped_matmul"));
  const int64_t used = off.back();  // the padding rows past the groups come out zero
  if (x.dtype == DType::bf16) {
    // Mixed precision (passes/autocast): each group on the bf16 GEMM (gemm.h), as matmul runs,
    // instead of widening x and every expert's weights to f32 on each call.
    LJ_CHECK(w.dtype == DType::bf16) << "grouped_matmul operand dtypes differ";
    const bool f32_out = y.dtype == DType::f32;
    ScopedOmpThreads omp(std::max(1, c.threads));
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t r0 = off[static_cast<size_t>(e)], m = off[static_cast<size_t>(e) + 1] - r0;
      for_row_chunks(m, [&](int64_t r, int64_t rows_r) {
        gemm_bf16(false, tb, rows_r, n, kd, x.as<uint16_t>() + (r0 + r) * kd,
                  w.as<uint16_t>() + e * n * kd, element(y, (r0 + r) * n), f32_out,
                  /*accumulate=*/false);
      });
    }
    std::memset(element(y, used * n), 0,
                static_cast<size_t>((rows - used) * n) * dtype_size(y.dtype));
    return ok_status();
  }
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    // The used rows split evenly over the threads across group boundaries, each piece of a group
    // one GEMM on its thread: one fork per call, not one per group of a GEMM split over every
    // thread. At the Mixtral-shaped model's sizes (bench/micro/moe_bench.cc, AMD EPYC, 2 threads,
    // two interleaved runs) 1.01-1.04x on the gate-up forward, 0.99-1.02x on the down forward,
    // 1.20-1.24x and 1.02-1.15x on the input gradients; the step 1.017x tokens/s (paired, 6
    // rounds of bench/speed/ab.sh on mixtral-h256 B4 T256 compiled).
#pragma omp parallel num_threads(std::max(1, c.threads))
    {
      const auto [lo, hi] = thread_range(used, omp_get_thread_num(), omp_get_num_threads(), 16);
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t r0 = std::max(lo, off[static_cast<size_t>(e)]);
        const int64_t r1 = std::min(hi, off[static_cast<size_t>(e) + 1]);
        if (r1 <= r0) continue;
        gemm_one(false, tb, r1 - r0, n, kd, x.as<T>() + r0 * kd, kd, w.as<T>() + e * n * kd,
                 tb ? kd : n, y.as<T>() + r0 * n, n);
      }
    }
    std::memset(y.as<T>() + used * n, 0, static_cast<size_t>((rows - used) * n) * sizeof(T));
  });
  return ok_status();
}

// a (R, P), b (R, Q) -> out (E, P, Q) = a_e^T b_e.
Status grouped_matmul_wgrad_forward(KernelContext& c) {
  const TensorView& a = c.in[0];
  const TensorView& b = c.in[1];
  TensorView& out = c.out[0];
  const int64_t rows = a.dims[0], p = a.dims[1], q = b.dims[1], experts = out.dims[0];
  LJ_ASSIGN_OR_RETURN(std::vector<int64_t> off,
                      group_offsets(c.in[2], rows, "grouped_matmul_wgrad"));
  if (a.dtype == DType::bf16) {
    // bf16 operands, out bf16 or f32 (master weights fold the gradient's cast in: autocast).
    LJ_CHECK(b.dtype == DType::bf16) << "grouped_matmul_wgrad operand dtypes differ";
    // The chunks of a group sum into f32 (oneDNN's sum post-op); a bf16 out is rounded once.
    const bool f32_out = out.dtype == DType::f32;
    std::vector<float> sum(f32_out ? 0 : static_cast<size_t>(p * q));
    ScopedOmpThreads omp(std::max(1, c.threads));
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t r0 = off[static_cast<size_t>(e)], m = off[static_cast<size_t>(e) + 1] - r0;
      float* acc = f32_out ? reinterpret_cast<float*>(element(out, e * p * q)) : sum.data();
      if (m == 0) std::memset(acc, 0, static_cast<size_t>(p * q) * sizeof(float));
      for_row_chunks(m, [&](int64_t r, int64_t rows_r) {
        gemm_bf16(true, false, p, q, rows_r, a.as<uint16_t>() + (r0 + r) * p,
                  b.as<uint16_t>() + (r0 + r) * q, acc, /*c_f32=*/true, /*accumulate=*/r > 0);
      });
      if (!f32_out) f32_to_bf16_row(acc, out.as<uint16_t>() + e * p * q, p * q);
    }
    return ok_status();
  }
  dispatch_float(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Each thread takes the same share of every expert's output rows (of P): balanced whatever
    // the group sizes, one fork per call, and every element still sums its group's rows in order
    // (bitwise the same at any thread count). 1.03-1.06x (gate-up) and 1.16-1.18x (down), as above.
#pragma omp parallel num_threads(std::max(1, c.threads))
    {
      const auto [lo, hi] = thread_range(p, omp_get_thread_num(), omp_get_num_threads(), 16);
      for (int64_t e = 0; e < experts && hi > lo; ++e) {
        const int64_t r0 = off[static_cast<size_t>(e)], m = off[static_cast<size_t>(e) + 1] - r0;
        T* dst = out.as<T>() + e * p * q + lo * q;
        if (m == 0) {
          std::memset(dst, 0, static_cast<size_t>((hi - lo) * q) * sizeof(T));
          continue;
        }
        gemm_one(true, false, hi - lo, q, m, a.as<T>() + r0 * p + lo, p, b.as<T>() + r0 * q, q, dst,
                 q);
      }
    }
  });
  return ok_status();
}

}  // namespace

void register_moe(KernelTable& t) {
  t[Op::topk] = topk_forward;
  t[Op::moe_sort] = moe_sort_forward;
  t[Op::grouped_matmul] = grouped_matmul_forward;
  t[Op::grouped_matmul_wgrad] = grouped_matmul_wgrad_forward;
  t.bf16[static_cast<int>(Op::grouped_matmul)] = true;
  t.bf16[static_cast<int>(Op::grouped_matmul_wgrad)] = true;
}

}  // namespace lj::cpu
