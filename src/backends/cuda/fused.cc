#include "backends/cuda/fused.h"

#include <map>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/fused_launch.h"
#include "codegen/cuda_renderer.h"

namespace lj::cuda {

StatusOr<std::unique_ptr<FusedKernels>> FusedKernels::load(std::span<const codegen::Kernel> kernels,
                                                           codegen::CudaKernelCache& cache) {
  LJ_ASSIGN_OR_RETURN(std::vector<codegen::CudaKernelFile> files, cache.get(kernels));
  std::unique_ptr<FusedKernels> f(new FusedKernels());
  std::map<std::string, cudaLibrary_t> by_path;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const codegen::CudaKernelFile& file = files[i];
    auto it = by_path.find(file.path);
    if (it == by_path.end()) {
      cudaLibrary_t lib = nullptr;
      LJ_CUDA_RETURN_IF_ERROR(cudaLibraryLoadFromFile(&lib, file.path.c_str(), nullptr, nullptr, 0,
                                                      nullptr, nullptr, 0));
      f->libraries_.push_back(lib);
      it = by_path.emplace(file.path, lib).first;
    }
    cudaKernel_t k = nullptr;
    LJ_CUDA_RETURN_IF_ERROR(cudaLibraryGetKernel(&k, it->second, file.entry.c_str()));
    f->kernels_.push_back(kernels[i]);
    f->entries_.push_back(k);
  }
  return f;
}

FusedKernels::~FusedKernels() {
  for (cudaLibrary_t lib : libraries_) (void)cudaLibraryUnload(lib);
}

Status FusedKernels::launch(size_t index, KernelContext& c, const KernelEnv& env) const {
  LJ_CHECK_LT(index, kernels_.size());
  const codegen::Kernel& k = kernels_[index];
  FusedLaunch l;
  LJ_RETURN_IF_ERROR(fused_launch(k, c, &l));
  const int64_t grid = codegen::cuda_grid_size(k, l.geo, env.multiprocessors);
  if (grid == 0) return ok_status();
  std::vector<uint64_t> words = codegen::cuda_launch_words(k, l.geo, l.in, l.out);
  void* args[] = {words.data()};
  return cuda_status(cudaLaunchKernel(reinterpret_cast<const void*>(entries_[index]),
                                      dim3(static_cast<unsigned>(grid)), dim3(codegen::kCudaBlock),
                                      args, 0, env.stream),
                     "cudaLaunchKernel (fused pointwise)");
}

}  // namespace lj::cuda
