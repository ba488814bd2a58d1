#include "backends/cuda/context.h"

#include "backends/cuda/cuda_check.h"

namespace lj::cuda {

StatusOr<std::unique_ptr<Context>> Context::create(int device) {
  const Probe p = probe();
  if (device < 0 || device >= p.device_count()) {
    return unimplemented(
        "no CUDA device " + std::to_string(device) + (p.error.empty() ? "" : " (" + p.error + ")"),
        "run on a host with an NVIDIA GPU and driver (`ljperf doctor`), or use "
        "--device cpu");
  }
  LJ_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  std::unique_ptr<Context> c(new Context());
  c->props_ = p.devices[static_cast<size_t>(device)];
  LJ_ASSIGN_OR_RETURN(c->stream_, Stream::create());
  c->source_ = device_memory_source(device);
  c->allocator_ = std::make_unique<CachingAllocator>(*c->source_);
  LJ_RETURN_IF_ERROR(c->source_->allocate(kGemmWorkspaceBytes, &c->gemm_workspace_));
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
    return internal_error("cublasLtCreate failed", "`ljperf doctor` checks the driver");
  c->env_ = KernelEnv{c->stream_.get(), lt, c->gemm_workspace_, kGemmWorkspaceBytes,
                      c->props_.multiprocessors};
  return c;
}

Context::~Context() {
  if (stream_.get() != nullptr) (void)stream_.synchronize();
  if (env_.lt != nullptr) cublasLtDestroy(env_.lt);
  if (gemm_workspace_ != nullptr) source_->free(gemm_workspace_);
  allocator_.reset();
}

}  // namespace lj::cuda
