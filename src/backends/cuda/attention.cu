#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/cuda/attention.cuh"
#include "backends/cuda/device_util.cuh"
#include "backends/cuda/flash_attention.cuh"
#include "backends/cuda/workspace.h"

namespace lj::cuda {
namespace {

constexpr int kThreads = 128;  // keys per chunk; D <= 2 * kThreads
constexpr int kMaxD = 2 * kThreads;

using Dims = SdpaDims;

template <class T>
__device__ float dot_row(const float* a_shared, const T* b, int64_t d) {
  float s = 0;
  for (int64_t x = 0; x < d; ++x) s += a_shared[x] * to_f32(b[x]);
  return s;
}

// grid (Tq, H, B).
template <class T>
__global__ void __launch_bounds__(kThreads)
    sdpa_forward_kernel(const T* q, const T* k, const T* v, T* out, float* lse, Dims dm) {
  __shared__ float qs[kMaxD];
  __shared__ float p[kThreads];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t g = h / (dm.h / dm.g);
  const int64_t d = dm.d;
  const T* qi = q + ((b * dm.h + h) * dm.tq + i) * d;
  const T* kb = k + (b * dm.g + g) * dm.tk * d;
  const T* vb = v + (b * dm.g + g) * dm.tk * d;
  for (int64_t x = threadIdx.x; x < d; x += blockDim.x) qs[x] = to_f32(qi[x]);
  __syncthreads();
  float acc[2] = {0, 0};
  float m = -INFINITY, l = 0;
  const int64_t key_end = dm.causal ? i + 1 : dm.tk;
  const int64_t key_begin = dm.window > 0 && i + 1 > dm.window ? i + 1 - dm.window : 0;
  for (int64_t j0 = key_begin; j0 < key_end; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    const float s = j < key_end ? dm.scale * dot_row(qs, kb + j * d, d) : -INFINITY;
    const float m_new = fmaxf(m, block_max(s));
    const float pj = j < key_end ? expf(s - m_new) : 0.0f;
    const float alpha = expf(m - m_new);  // 0 on the first chunk (m = -inf)
    l = l * alpha + block_sum(pj);
    __syncthreads();
    p[threadIdx.x] = pj;
    __syncthreads();
    const int64_t nk = key_end - j0 < blockDim.x ? key_end - j0 : blockDim.x;
    for (int r = 0; r < 2; ++r) {
      const int64_t x = threadIdx.x + r * blockDim.x;
      if (x >= d) continue;
      float a = acc[r] * alpha;
      for (int64_t jj = 0; jj < nk; ++jj) a += p[jj] * to_f32(vb[(j0 + jj) * d + x]);
      acc[r] = a;
    }
    m = m_new;
  }
  T* oi = out + ((b * dm.h + h) * dm.tq + i) * d;
  for (int r = 0; r < 2; ++r) {
    const int64_t x = threadIdx.x + r * blockDim.x;
    if (x < d) oi[x] = from_f32<T>(l > 0 ? acc[r] / l : 0.0f);
  }
  if (threadIdx.x == 0) lse[(b * dm.h + h) * dm.tq + i] = l > 0 ? m + logf(l) : -INFINITY;
}

// grid (Tq, H, B): Di and dQ.
template <class T>
__global__ void __launch_bounds__(kThreads)
    sdpa_dq_kernel(const T* q, const T* k, const T* v, const T* out, const float* lse,
                   const T* dout, T* dq, float* di_out, Dims dm) {
  __shared__ float qs[kMaxD];
  __shared__ float dos[kMaxD];
  __shared__ float ds[kThreads];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t g = h / (dm.h / dm.g);
  const int64_t d = dm.d;
  const int64_t row = (b * dm.h + h) * dm.tq + i;
  const T* kb = k + (b * dm.g + g) * dm.tk * d;
  const T* vb = v + (b * dm.g + g) * dm.tk * d;
  float di = 0;
  for (int64_t x = threadIdx.x; x < d; x += blockDim.x) {
    qs[x] = to_f32(q[row * d + x]);
    dos[x] = to_f32(dout[row * d + x]);
    di += dos[x] * to_f32(out[row * d + x]);
  }
  di = block_sum(di);  // synchronises: qs and dos are complete
  if (threadIdx.x == 0) di_out[row] = di;
  const float li = lse[row];
  float acc[2] = {0, 0};
  const int64_t key_end = dm.causal ? i + 1 : dm.tk;
  const int64_t key_begin = dm.window > 0 && i + 1 > dm.window ? i + 1 - dm.window : 0;
  for (int64_t j0 = key_begin; j0 < key_end; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    float dsj = 0;
    if (j < key_end) {
      const float pj = expf(dm.scale * dot_row(qs, kb + j * d, d) - li);
      dsj = pj * (dot_row(dos, vb + j * d, d) - di);
    }
    __syncthreads();
    ds[threadIdx.x] = dsj;
    __syncthreads();
    const int64_t nk = key_end - j0 < blockDim.x ? key_end - j0 : blockDim.x;
    for (int r = 0; r < 2; ++r) {
      const int64_t x = threadIdx.x + r * blockDim.x;
      if (x >= d) continue;
      float a = acc[r];
      for (int64_t jj = 0; jj < nk; ++jj) a += ds[jj] * to_f32(kb[(j0 + jj) * d + x]);
      acc[r] = a;
    }
  }
  for (int r = 0; r < 2; ++r) {
    const int64_t x = threadIdx.x + r * blockDim.x;
    if (x < d) dq[row * d + x] = from_f32<T>(dm.scale * acc[r]);
  }
}

// grid (Tk, G, B): dK and dV of key j of kv head g, over the group's heads and their queries.
template <class T>
__global__ void __launch_bounds__(kThreads)
    sdpa_dkv_kernel(const T* q, const T* k, const T* v, const float* lse, const T* dout,
                    const float* di, T* dk, T* dv, Dims dm) {
  __shared__ float ks[kMaxD];
  __shared__ float vs[kMaxD];
  __shared__ float ps[kThreads];
  __shared__ float dss[kThreads];
  const int64_t j = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int64_t d = dm.d, group = dm.h / dm.g;
  const int64_t krow = (b * dm.g + g) * dm.tk + j;
  for (int64_t x = threadIdx.x; x < d; x += blockDim.x) {
    ks[x] = to_f32(k[krow * d + x]);
    vs[x] = to_f32(v[krow * d + x]);
  }
  __syncthreads();
  float adk[2] = {0, 0}, adv[2] = {0, 0};
  const int64_t q_begin = dm.causal ? j : 0;
  const int64_t q_end = dm.window > 0 && j + dm.window < dm.tq ? j + dm.window : dm.tq;
  for (int64_t hh = 0; hh < group; ++hh) {
    const int64_t h = g * group + hh;
    const int64_t qbase = (b * dm.h + h) * dm.tq;
    for (int64_t i0 = q_begin; i0 < q_end; i0 += blockDim.x) {
      const int64_t i = i0 + threadIdx.x;
      float pij = 0, dsij = 0;
      if (i < q_end) {
        const float s = dm.scale * dot_row(ks, q + (qbase + i) * d, d);
        pij = expf(s - lse[qbase + i]);
        dsij = pij * (dot_row(vs, dout + (qbase + i) * d, d) - di[qbase + i]);
      }
      __syncthreads();
      ps[threadIdx.x] = pij;
      dss[threadIdx.x] = dsij;
      __syncthreads();
      const int64_t nq = q_end - i0 < blockDim.x ? q_end - i0 : blockDim.x;
      for (int r = 0; r < 2; ++r) {
        const int64_t x = threadIdx.x + r * blockDim.x;
        if (x >= d) continue;
        float a = adk[r], c = adv[r];
        for (int64_t ii = 0; ii < nq; ++ii) {
          const int64_t qr = (qbase + i0 + ii) * d + x;
          a += dss[ii] * to_f32(q[qr]);
          c += ps[ii] * to_f32(dout[qr]);
        }
        adk[r] = a;
        adv[r] = c;
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    const int64_t x = threadIdx.x + r * blockDim.x;
    if (x >= d) continue;
    dk[krow * d + x] = from_f32<T>(dm.scale * adk[r]);
    dv[krow * d + x] = from_f32<T>(adv[r]);
  }
}

// LJ_CUDA_FLASH=0 runs the plain kernels for every call (a fallback, and the baseline of
// gpu_attention_bench's comparison).
bool flash_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LJ_CUDA_FLASH");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

Status dims_of(KernelContext& c, Dims* dm) {
  const TensorView &q = c.in[0], &k = c.in[1];
  *dm = Dims{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), false, 0.0f, 0};
  dm->causal = c.attrs().b_or("causal", false);
  LJ_CHECK(!dm->causal || dm->tq == dm->tk) << "causal sdpa needs Tq == Tk";
  dm->window = c.attrs().i_or("window", 0);
  LJ_CHECK(dm->window == 0 || (dm->causal && dm->window > 0)) << "sdpa window needs causal";
  double scale = c.attrs().f_or("scale", 0.0);
  if (scale <= 0) scale = 1.0 / std::sqrt(static_cast<double>(dm->d));
  dm->scale = static_cast<float>(scale);
  if (dm->d > kMaxD) {
    return unimplemented(
        "CUDA sdpa: head dim " + std::to_string(dm->d) + " is over " + std::to_string(kMaxD),
        "run with --device cpu");
  }
  if (dm->tq >= 65536 * 32768LL || dm->h > 65535 || dm->b > 65535 || dm->g > 65535)
    return unimplemented("CUDA sdpa: grid too large", "run with --device cpu");
  return ok_status();
}

}  // namespace

Status sdpa_forward(KernelContext& c, const KernelEnv& env) {
  Dims dm;
  LJ_RETURN_IF_ERROR(dims_of(c, &dm));
  if (dm.b * dm.h * dm.tq == 0) return ok_status();
  if (flash_enabled() && flash_supports(dm, c.in[0].dtype)) return flash_forward(c, env, dm);
  return dispatch_f32_bf16(c.in[0].dtype, "sdpa", [&](auto tag) -> Status {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>(dm.tq), static_cast<unsigned>(dm.h),
                    static_cast<unsigned>(dm.b));
    sdpa_forward_kernel<T><<<grid, kThreads, 0, env.stream>>>(
        c.in[0].as<const T>(), c.in[1].as<const T>(), c.in[2].as<const T>(), c.out[0].as<T>(),
        c.out[1].as<float>(), dm);
    return launched("sdpa_forward_kernel");
  });
}

Status sdpa_backward(KernelContext& c, const KernelEnv& env) {
  Dims dm;
  LJ_RETURN_IF_ERROR(dims_of(c, &dm));
  if (flash_enabled() && flash_supports(dm, c.in[0].dtype)) return flash_backward(c, env, dm);
  LJ_CHECK(c.workspace != nullptr) << "CUDA sdpa_backward needs a device workspace";
  const size_t di_bytes = sdpa_backward_scratch_bytes(dm.b, dm.h, dm.tq);
  float* di = nullptr;
  if (di_bytes > 0) {
    LJ_ASSIGN_OR_RETURN(void* p, c.workspace->acquire(di_bytes));
    di = static_cast<float*>(p);
  }
  return dispatch_f32_bf16(c.in[0].dtype, "sdpa_backward", [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* q = c.in[0].as<const T>();
    const T* k = c.in[1].as<const T>();
    const T* v = c.in[2].as<const T>();
    const T* out = c.in[3].as<const T>();
    const float* lse = c.in[4].as<const float>();
    const T* dout = c.in[5].as<const T>();
    if (dm.b * dm.h * dm.tq > 0) {
      sdpa_dq_kernel<T>
          <<<dim3(static_cast<unsigned>(dm.tq), static_cast<unsigned>(dm.h),
                  static_cast<unsigned>(dm.b)),
             kThreads, 0, env.stream>>>(q, k, v, out, lse, dout, c.out[0].as<T>(), di, dm);
    }
    if (dm.b * dm.g * dm.tk > 0) {
      sdpa_dkv_kernel<T><<<dim3(static_cast<unsigned>(dm.tk), static_cast<unsigned>(dm.g),
                                static_cast<unsigned>(dm.b)),
                           kThreads, 0, env.stream>>>(q, k, v, lse, dout, di, c.out[1].as<T>(),
                                                      c.out[2].as<T>(), dm);
    }
    return launched("sdpa_backward");
  });
}

void register_attention(CudaKernelTable& t) {
  t[Op::sdpa] = sdpa_forward;
  t[Op::sdpa_backward] = sdpa_backward;
}

}  // namespace lj::cuda
