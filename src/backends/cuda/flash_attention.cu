// The flash-attention kernels: flash_attention.h's block bodies with the device executor.
//
// Resources (nvcc 13.0, sm_90, ptxas -v; tools/cuda_resources.sh prints this table): registers
// per thread / dynamic shared memory per block, no spills in any kernel.
//   bf16       D=32         D=48         D=64         D=128
//   forward    85 / 15 KiB 101 / 21 KiB 101 / 27 KiB  134 / 51 KiB
//   dq        124 / 20 KiB 128 / 28 KiB 128 / 36 KiB  168 / 68 KiB
//   dkv       141 / 20 KiB 168 / 28 KiB 160 / 27 KiB  243 / 51 KiB
//   f32: 124-254 registers, 45-150 KiB (the accuracy path; one block per SM at D = 128).
// Occupancy on an H100/H200 SM (64K registers, 228 KiB shared memory, 128 threads per block):
// bf16 forward D=64 4 blocks (16 warps; 104 registers allocated), D=128 3 (12 warps, both
// limits); dq D=64 4 blocks, D=128 3; dkv D=64 3 blocks, D=128 2 (248 registers allocated). All
// register-bound: bf16 keeps P and dS in registers, so shared memory holds only the Q, K, V
// (dO) tiles. Every warp issues 8 independent mma chains per k step, which covers the mma
// latency at 8-16 warps per SM; the f32 kernels run one block per SM at D=128.
// __launch_bounds__: bf16 leaves ptxas its register heuristic (it keeps the forward at 96-128
// registers without spilling); f32 says one block per SM (without it ptxas capped some f32
// kernels at 96-128 registers and spilled 12-20 bytes).
#include "backends/cuda/flash_attention.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/workspace.h"

namespace lj::cuda {
namespace {

using flash::Params;

// __launch_bounds__' minimum blocks per SM: 0 (ptxas decides) for bf16, 1 for f32 (see above).
template <class E>
inline constexpr int kMinBlocks = sizeof(E) == 4 ? 1 : 0;

struct DeviceExec {
  char* sm;
  __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ char* smem() const { return sm; }
  __device__ __forceinline__ void sync() { __syncthreads(); }
  __device__ __forceinline__ void sync_warp() { __syncwarp(); }
  __device__ __forceinline__ float shfl_xor(float v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
  }
  __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4],
                                      const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();  // flash_supports() refuses devices before sm_80
#endif
  }
  __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint16_t* row) {
    const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
  __device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const uint16_t* row) {
    const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
  __device__ __forceinline__ void copy16(void* dst, const void* src) {
    *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
  }
};

template <class E, int D>
__global__ void __launch_bounds__(flash::kThreads, kMinBlocks<E>)
    flash_forward_kernel(Params<E> p) {
  extern __shared__ __align__(16) char smem[];
  DeviceExec x{smem};
  // The last query tiles (the most keys under the causal mask) first.
  flash::forward_block<E, D>(x, p, static_cast<int>(gridDim.x - 1 - blockIdx.x),
                             static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z));
}

template <class E>
__global__ void __launch_bounds__(flash::kThreads, kMinBlocks<E>)
    flash_di_kernel(Params<E> p, int64_t rows) {
  extern __shared__ __align__(16) char smem[];
  DeviceExec x{smem};
  flash::di_block<E>(x, p, static_cast<int>(blockIdx.x), rows);
}

template <class E, int D>
__global__ void __launch_bounds__(flash::kThreads, kMinBlocks<E>) flash_dq_kernel(Params<E> p) {
  extern __shared__ __align__(16) char smem[];
  DeviceExec x{smem};
  flash::dq_block<E, D>(x, p, static_cast<int>(gridDim.x - 1 - blockIdx.x),
                        static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z));
}

template <class E, int D>
__global__ void __launch_bounds__(flash::kThreads, kMinBlocks<E>) flash_dkv_kernel(Params<E> p) {
  extern __shared__ __align__(16) char smem[];
  DeviceExec x{smem};
  // Causal: the first key tiles see the most queries; they go first.
  flash::dkv_block<E, D>(x, p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                         static_cast<int>(blockIdx.z));
}

// The padded head dim of the kernels for d (0: none).
int padded_d(int64_t d) {
  for (int pd : {32, 48, 64, 128})
    if (d <= pd) return pd;
  return 0;
}

template <class E, int D>
int max_smem_bytes() {
  const int f = flash::forward_smem_bytes<E, D>(), q = flash::dq_smem_bytes<E, D>(),
            kv = flash::dkv_smem_bytes<E, D>();
  return f > q ? (f > kv ? f : kv) : (q > kv ? q : kv);
}

// f(E{}, std::integral_constant<int, D>{}) for the dtype and padded head dim.
template <class F>
Status dispatch(DType dt, int64_t d, F&& f) {
  const auto with_d = [&](auto e) -> Status {
    switch (padded_d(d)) {
      case 32:
        return f(e, std::integral_constant<int, 32>{});
      case 48:
        return f(e, std::integral_constant<int, 48>{});
      case 64:
        return f(e, std::integral_constant<int, 64>{});
      case 128:
        return f(e, std::integral_constant<int, 128>{});
      default:
        return unimplemented("flash sdpa: head dim " + std::to_string(d));
    }
  };
  if (dt == DType::f32) return with_d(float{});
  if (dt == DType::bf16) return with_d(uint16_t{});
  return dtype_unsupported("sdpa", dt);
}

template <class K>
Status set_smem(K kernel, int bytes, const char* what) {
  return cuda_status(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), what);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <class E>
Params<E> params_of(const SdpaDims& dm) {
  Params<E> p{};
  p.h = static_cast<int>(dm.h);
  p.g = static_cast<int>(dm.g);
  p.tq = static_cast<int>(dm.tq);
  p.tk = static_cast<int>(dm.tk);
  p.d = static_cast<int>(dm.d);
  p.causal = dm.causal ? 1 : 0;
  p.scale = dm.scale;
  p.scale_log2 = dm.scale * flash::kLog2e;
  return p;
}

unsigned tiles(int64_t n) {
  return static_cast<unsigned>((n + flash::kBlockRows - 1) / flash::kBlockRows);
}

}  // namespace

bool flash_supports(const SdpaDims& dm, DType dt) {
  if (dm.window > 0) return false;
  if (dt != DType::f32 && dt != DType::bf16) return false;
  if (padded_d(dm.d) == 0 || dm.tq >= (1LL << 31) || dm.tk >= (1LL << 31)) return false;
  int dev = 0, major = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    return false;
  }
  if (major < 8) return false;  // mma.sync bf16 needs sm_80
  int need = 0;
  const Status s = dispatch(dt, dm.d, [&](auto e, auto dc) -> Status {
    need = max_smem_bytes<decltype(e), decltype(dc)::value>();
    return ok_status();
  });
  return s.ok() && need <= optin;
}

Status flash_forward(KernelContext& c, const KernelEnv& env, const SdpaDims& dm) {
  return dispatch(c.in[0].dtype, dm.d, [&](auto e, auto dc) -> Status {
    using E = decltype(e);
    constexpr int D = decltype(dc)::value;
    Params<E> p = params_of<E>(dm);
    p.q = c.in[0].as<const E>();
    p.k = c.in[1].as<const E>();
    p.v = c.in[2].as<const E>();
    p.o = c.out[0].as<E>();
    p.lse_out = c.out[1].as<float>();
    p.vec16 = dm.d == D && aligned16(p.q) && aligned16(p.k) && aligned16(p.v);
    constexpr int bytes = flash::forward_smem_bytes<E, D>();
    LJ_RETURN_IF_ERROR(set_smem(flash_forward_kernel<E, D>, bytes, "flash sdpa forward"));
    const dim3 grid(tiles(dm.tq), static_cast<unsigned>(dm.h), static_cast<unsigned>(dm.b));
    flash_forward_kernel<E, D><<<grid, flash::kThreads, bytes, env.stream>>>(p);
    return launched("flash_forward_kernel");
  });
}

Status flash_backward(KernelContext& c, const KernelEnv& env, const SdpaDims& dm) {
  const int64_t rows = dm.b * dm.h * dm.tq;
  LJ_CHECK(c.workspace != nullptr) << "CUDA sdpa_backward needs a device workspace";
  float* di = nullptr;
  if (rows > 0) {
    LJ_ASSIGN_OR_RETURN(void* p,
                        c.workspace->acquire(sdpa_backward_scratch_bytes(dm.b, dm.h, dm.tq)));
    di = static_cast<float*>(p);
  }
  return dispatch(c.in[0].dtype, dm.d, [&](auto e, auto dc) -> Status {
    using E = decltype(e);
    constexpr int D = decltype(dc)::value;
    Params<E> p = params_of<E>(dm);
    p.q = c.in[0].as<const E>();
    p.k = c.in[1].as<const E>();
    p.v = c.in[2].as<const E>();
    p.out = c.in[3].as<const E>();
    p.lse = c.in[4].as<const float>();
    p.dout = c.in[5].as<const E>();
    p.dq = c.out[0].as<E>();
    p.dk = c.out[1].as<E>();
    p.dv = c.out[2].as<E>();
    p.di = di;
    p.di_out = di;
    p.vec16 = dm.d == D && aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.dout);
    if (rows > 0) {
      flash_di_kernel<E><<<tiles(rows), flash::kThreads, 0, env.stream>>>(p, rows);
      constexpr int bytes = flash::dq_smem_bytes<E, D>();
      LJ_RETURN_IF_ERROR(set_smem(flash_dq_kernel<E, D>, bytes, "flash sdpa dq"));
      const dim3 grid(tiles(dm.tq), static_cast<unsigned>(dm.h), static_cast<unsigned>(dm.b));
      flash_dq_kernel<E, D><<<grid, flash::kThreads, bytes, env.stream>>>(p);
    }
    if (dm.b * dm.g * dm.tk > 0) {
      constexpr int bytes = flash::dkv_smem_bytes<E, D>();
      LJ_RETURN_IF_ERROR(set_smem(flash_dkv_kernel<E, D>, bytes, "flash sdpa dkv"));
      const dim3 grid(tiles(dm.tk), static_cast<unsigned>(dm.g), static_cast<unsigned>(dm.b));
      flash_dkv_kernel<E, D><<<grid, flash::kThreads, bytes, env.stream>>>(p);
    }
    return launched("flash sdpa backward");
  });
}

}  // namespace lj::cuda
