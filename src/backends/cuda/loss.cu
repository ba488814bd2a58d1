#include <algorithm>
#include <climits>
#include <string>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/gemm.h"
#include "backends/cuda/loss.cuh"
#include "backends/cuda/workspace.h"

namespace lj::cuda {
namespace {

// first_bad: the smallest row whose label is neither ignore nor in [0, V); count: valid rows.
template <class L>
__global__ void check_labels_kernel(const L* labels, int64_t n, int64_t vocab, int64_t ignore,
                                    long long* first_bad, int* count) {
  int valid = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    if (y == ignore) continue;
    if (y < 0 || y >= vocab) {
      atomicMin(first_bad, static_cast<long long>(i));
    } else {
      ++valid;
    }
  }
  const float total = block_sum(static_cast<float>(valid));
  if (threadIdx.x == 0) *count = static_cast<int>(total + 0.5f);
}

// Row i's max and logsumexp (every thread gets them).
template <class T>
__device__ void row_stats(const T* row, int64_t vocab, float* mx, float* lse) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) m = fmaxf(m, to_f32(row[j]));
  m = block_max(m);
  float s = 0;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) s += expf(to_f32(row[j]) - m);
  s = block_sum(s);
  *mx = m;
  *lse = m + logf(s);
}

template <class T, class L>
__global__ void ce_rows_kernel(const T* logits, const L* labels, int64_t rows, int64_t vocab,
                               int64_t ignore, float* row_loss) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    if (y == ignore || y < 0 || y >= vocab) {
      if (threadIdx.x == 0) row_loss[i] = 0;
      continue;
    }
    const T* row = logits + i * vocab;
    float m, lse;
    row_stats(row, vocab, &m, &lse);
    if (threadIdx.x == 0) row_loss[i] = lse - to_f32(row[y]);
  }
}

__global__ void ce_mean_kernel(const float* row_loss, int64_t rows, const int* count, float* out) {
  float s = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) s += row_loss[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s / static_cast<float>(*count);
}

template <class T, class L>
__global__ void ce_backward_kernel(const T* logits, const L* labels, const float* dloss,
                                   const int* count, T* dlogits, int64_t rows, int64_t vocab,
                                   int64_t ignore) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    T* drow = dlogits + i * vocab;
    if (y == ignore || y < 0 || y >= vocab) {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) drow[j] = from_f32<T>(0.0f);
      continue;
    }
    const T* row = logits + i * vocab;
    float m, lse;
    row_stats(row, vocab, &m, &lse);
    const float k = *dloss / static_cast<float>(*count);
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float p = expf(to_f32(row[j]) - lse);
      drow[j] = from_f32<T>((p - (j == y ? 1.0f : 0.0f)) * k);
    }
  }
}

// One chunk of linear_cross_entropy: logits (rows, V) f32 -> row losses and, for dloss = 1,
// dlogits = (softmax - onehot) / num_valid into d (T; may alias logits when T is f32).
template <class T, class L>
__global__ void lce_rows_kernel(const float* logits, const L* labels, const int* count,
                                int64_t rows, int64_t vocab, int64_t ignore, float* row_loss,
                                T* d) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    const float* row = logits + i * vocab;
    T* drow = d + i * vocab;
    if (y == ignore || y < 0 || y >= vocab) {
      if (threadIdx.x == 0) row_loss[i] = 0;
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) drow[j] = from_f32<T>(0.0f);
      continue;
    }
    float m, lse;
    row_stats(row, vocab, &m, &lse);
    const float target = row[y];
    __syncthreads();  // every thread has read row[y] before it is overwritten
    if (threadIdx.x == 0) row_loss[i] = lse - target;
    const float k = 1.0f / static_cast<float>(*count);
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float p = expf(row[j] - lse);
      drow[j] = from_f32<T>((p - (j == y ? 1.0f : 0.0f)) * k);
    }
  }
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows < (1 << 30) ? rows : (1 << 30)));
}

// Scratch: the first bad row (8 bytes), the count (4, padded to 8), then the per-row floats, at
// the start of the kernel's one request of `bytes` (workspace.h), which `base` points to.
struct Scratch {
  char* base;
  long long* first_bad;
  int* count;
  float* floats;
};
StatusOr<Scratch> scratch(KernelContext& c, size_t bytes) {
  LJ_CHECK(c.workspace != nullptr) << "CUDA cross_entropy needs a device workspace";
  LJ_ASSIGN_OR_RETURN(void* v, c.workspace->acquire(bytes));
  char* p = static_cast<char*>(v);
  return Scratch{p, reinterpret_cast<long long*>(p), reinterpret_cast<int*>(p + 8),
                 reinterpret_cast<float*>(p + 16)};
}

// Launches the label check, which also counts the valid labels (*s.count, the mean's
// denominator), and returns its verdict (synchronises the stream). Without env.check_ids only
// the count is made, and nothing synchronises (CUDA-graph capture).
template <class L>
Status check_labels(const L* labels, int64_t n, int64_t vocab, int64_t ignore, const Scratch& s,
                    const KernelEnv& env) {
  const long long none = LLONG_MAX;
  if (env.check_ids) {
    LJ_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(s.first_bad, &none, sizeof none, cudaMemcpyHostToDevice, env.stream));
  }
  check_labels_kernel<L>
      <<<1, 1024, 0, env.stream>>>(labels, n, vocab, ignore, s.first_bad, s.count);
  LJ_RETURN_IF_ERROR(launched("check_labels_kernel"));
  if (!env.check_ids) return ok_status();
  long long bad = none;
  LJ_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&bad, s.first_bad, sizeof bad, cudaMemcpyDeviceToHost, env.stream));
  LJ_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(env.stream));
  if (bad == none) return ok_status();
  L y{};
  LJ_CUDA_RETURN_IF_ERROR(cudaMemcpy(&y, labels + bad, sizeof y, cudaMemcpyDeviceToHost));
  return out_of_range("cross_entropy: label " + std::to_string(static_cast<int64_t>(y)) +
                          " at row " + std::to_string(bad) + " is outside the vocabulary [0, " +
                          std::to_string(vocab) + ")",
                      "the token data holds ids past the model's vocab_size");
}

}  // namespace

template <class F>
Status dispatch_labels(DType dt, const char* op, F&& f) {
  if (dt == DType::i32) return f(int32_t{});
  if (dt == DType::i64) return f(int64_t{});
  return dtype_unsupported(op, dt);
}

Status cross_entropy_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView& x = c.in[0];
  const int64_t rows = x.dim(0), vocab = x.dim(1);
  LJ_CHECK_LT(rows, int64_t{1} << 24) << "the valid-label count is an exact f32 sum";
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_ASSIGN_OR_RETURN(const Scratch s, scratch(c, loss_scratch_bytes(rows)));
  return dispatch_f32_bf16(x.dtype, "cross_entropy", [&](auto tag) -> Status {
    using T = decltype(tag);
    return dispatch_labels(c.in[1].dtype, "cross_entropy labels", [&](auto ltag) -> Status {
      using L = decltype(ltag);
      const L* labels = c.in[1].as<const L>();
      LJ_RETURN_IF_ERROR(check_labels(labels, rows, vocab, ignore, s, env));
      if (rows > 0) {
        ce_rows_kernel<T, L><<<row_grid(rows), kBlock, 0, env.stream>>>(
            x.as<const T>(), labels, rows, vocab, ignore, s.floats);
      }
      ce_mean_kernel<<<1, 1024, 0, env.stream>>>(s.floats, rows, s.count, c.out[0].as<float>());
      return launched("cross_entropy");
    });
  });
}

Status cross_entropy_backward(KernelContext& c, const KernelEnv& env) {
  const TensorView& x = c.in[0];
  const int64_t rows = x.dim(0), vocab = x.dim(1);
  LJ_CHECK_LT(rows, int64_t{1} << 24) << "the valid-label count is an exact f32 sum";
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_ASSIGN_OR_RETURN(const Scratch s, scratch(c, loss_scratch_bytes(0)));
  return dispatch_f32_bf16(x.dtype, "cross_entropy_backward", [&](auto tag) -> Status {
    using T = decltype(tag);
    return dispatch_labels(c.in[1].dtype, "cross_entropy_backward labels",
                           [&](auto ltag) -> Status {
                             using L = decltype(ltag);
                             const L* labels = c.in[1].as<const L>();
                             LJ_RETURN_IF_ERROR(check_labels(labels, rows, vocab, ignore, s, env));
                             if (rows == 0) return ok_status();
                             ce_backward_kernel<T, L><<<row_grid(rows), kBlock, 0, env.stream>>>(
                                 x.as<const T>(), labels, c.in[2].as<const float>(), s.count,
                                 c.out[0].as<T>(), rows, vocab, ignore);
                             return launched("cross_entropy_backward");
                           });
  });
}

// linear_cross_entropy(x (N, C), w (V, C), labels (N)) -> loss () f32, dx (N, C), dw (V, C):
// chunks of rows; per chunk logits = x w^T (f32 out), rows -> losses and dlogits (dloss = 1),
// dx[chunk] = dlogits w, dw += dlogits^T x[chunk] (beta = 1 after the first chunk). In bf16 with
// several chunks dw is summed in an f32 buffer and rounded to bf16 once at the end, as the CPU
// kernel and the autocast contract do (summing into bf16 would round once per chunk).
__global__ void round_to_bf16_kernel(const float* in, __nv_bfloat16* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_f32<__nv_bfloat16>(in[i]);
  }
}

Status linear_cross_entropy_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView &x = c.in[0], &w = c.in[1], &lab = c.in[2];
  const int64_t rows = x.dim(0), cols = x.dim(1), vocab = w.dim(0);
  LJ_CHECK_LT(rows, int64_t{1} << 24) << "the valid-label count is an exact f32 sum";
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  const int64_t chunk = linear_cross_entropy_chunk(c.attrs(), rows, vocab);
  const LinearCrossEntropyScratch at =
      linear_cross_entropy_scratch(rows, cols, vocab, chunk, x.dtype == DType::bf16);
  LJ_ASSIGN_OR_RETURN(const Scratch s, scratch(c, at.total));
  float* logits = reinterpret_cast<float*>(s.base + at.logits);
  void* dlogits = at.has_dlogits ? static_cast<void*>(s.base + at.dlogits) : logits;
  // bf16 over several chunks: dw's f32 sum (one rounding at the end).
  const int64_t dw_elems = vocab * cols;
  float* dw32 = at.has_dw32 ? reinterpret_cast<float*>(s.base + at.dw32) : nullptr;
  return dispatch_f32_bf16(x.dtype, "linear_cross_entropy", [&](auto tag) -> Status {
    using T = decltype(tag);
    return dispatch_labels(lab.dtype, "linear_cross_entropy labels", [&](auto ltag) -> Status {
      using L = decltype(ltag);
      const L* labels = lab.as<const L>();
      LJ_RETURN_IF_ERROR(check_labels(labels, rows, vocab, ignore, s, env));
      const size_t es = sizeof(T);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t nr = std::min(chunk, rows - r0);
        const char* xc = static_cast<const char*>(x.data) + static_cast<size_t>(r0 * cols) * es;
        LJ_RETURN_IF_ERROR(gemm(GemmShape{nr, vocab, cols, false, true}, x.dtype, DType::f32, xc,
                                w.data, nullptr, logits, env));
        lce_rows_kernel<T, L><<<row_grid(nr), kBlock, 0, env.stream>>>(
            logits, labels + r0, s.count, nr, vocab, ignore, s.floats + r0,
            static_cast<T*>(dlogits));
        LJ_RETURN_IF_ERROR(launched("lce_rows_kernel"));
        char* dx = static_cast<char*>(c.out[1].data) + static_cast<size_t>(r0 * cols) * es;
        LJ_RETURN_IF_ERROR(gemm(GemmShape{nr, cols, vocab, false, false}, x.dtype, x.dtype, dlogits,
                                w.data, nullptr, dx, env));
        void* dw = dw32 != nullptr ? static_cast<void*>(dw32) : c.out[2].data;
        LJ_RETURN_IF_ERROR(gemm(GemmShape{vocab, cols, nr, true, false}, x.dtype,
                                dw32 != nullptr ? DType::f32 : x.dtype, dlogits, xc,
                                r0 == 0 ? nullptr : dw, dw, env));
      }
      if (dw32 != nullptr) {
        round_to_bf16_kernel<<<grid_for(dw_elems, env.multiprocessors), kBlock, 0, env.stream>>>(
            dw32, c.out[2].as<__nv_bfloat16>(), dw_elems);
        LJ_RETURN_IF_ERROR(launched("round_to_bf16_kernel"));
      }
      if (rows == 0) {
        LJ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c.out[2].data, 0, c.out[2].bytes(), env.stream));
      }
      ce_mean_kernel<<<1, 1024, 0, env.stream>>>(s.floats, rows, s.count, c.out[0].as<float>());
      return launched("linear_cross_entropy");
    });
  });
}

void register_loss(CudaKernelTable& t) {
  t[Op::linear_cross_entropy] = linear_cross_entropy_forward;
  t[Op::cross_entropy] = cross_entropy_forward;
  t[Op::cross_entropy_backward] = cross_entropy_backward;
}

}  // namespace lj::cuda
