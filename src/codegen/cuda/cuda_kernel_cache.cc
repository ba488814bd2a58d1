#include "codegen/cuda/cuda_kernel_cache.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "codegen/cache_files.h"
#include "codegen/cuda/nvrtc.h"

namespace lj::codegen {
namespace fs = std::filesystem;
namespace {}  // namespace

CudaKernelCache::CudaKernelCache(std::string arch, std::string dir)
    : arch_(std::move(arch)),
      dir_(dir.empty() ? KernelCacheOptions::from_env().dir + "/cuda" : std::move(dir)) {}

KernelCacheStats CudaKernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

StatusOr<std::vector<CudaKernelFile>> CudaKernelCache::get(std::span<const Kernel> kernels) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CudaKernelFile> result(kernels.size());
  const std::string prelude = renderer_.prelude();
  const std::string salt = std::string("\n") + renderer_.name() + "\n" + nvrtc_options_text(arch_) +
                           "\nnvrtc " + nvrtc_version() + "\n" + arch_;
  std::vector<uint64_t> keys(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i)
    keys[i] = fnv1a64(prelude + renderer_.render(kernels[i], "lj_kernel_entry").source + salt);
  const std::map<uint64_t, std::vector<size_t>> pending =
      keys_to_build(std::span<const uint64_t>(keys), known_, result, stats_,
                    [&](uint64_t key) -> std::optional<CudaKernelFile> {
                      const std::string hex = hex64(key);
                      CudaKernelFile f{dir_ + "/k_" + hex + ".cubin", "lj_k_" + hex};
                      std::error_code ec;
                      if (!fs::exists(f.path, ec)) return std::nullopt;
                      return f;
                    });
  if (pending.empty()) return result;

  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    return io_error("cannot create the kernel cache " + dir_ + ": " + ec.message(),
                    "set LJ_KERNEL_CACHE to a writable directory");
  }
  std::string source = prelude;
  for (const auto& [key, idx] : pending)
    source += renderer_.render(kernels[idx[0]], "lj_k_" + hex64(key)).source;
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<std::string> cubin = nvrtc_compile(source, "lj_fused.cu", arch_);
  stats_.compile_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.compiler_runs;
  if (!cubin.ok()) {
    for (const auto& [key, idx] : pending) stats_.failed += static_cast<int64_t>(idx.size());
    return Status(cubin.status().code(), cubin.status().message() + "\n" + source,
                  cubin.status().hint());
  }
  const ScratchDir scratch(dir_);
  if (scratch.path().empty())
    return io_error("cannot create a temporary directory in " + dir_,
                    "set LJ_KERNEL_CACHE to a writable directory");
  const std::string& tmp = scratch.path();
  const std::string all = tmp + "/kernels.cubin";
  {
    std::ofstream out(all, std::ios::binary);
    out.write(cubin->data(), static_cast<std::streamsize>(cubin->size()));
    if (!out) return io_error("cannot write " + all, "is the disk full?");
  }
  for (const auto& [key, idx] : pending) {
    const std::string hex = hex64(key);
    const CudaKernelFile f{dir_ + "/k_" + hex + ".cubin", "lj_k_" + hex};
    const std::string staged = tmp + "/k_" + hex + ".cubin";
    if (!install_file(all, staged, f.path))
      return io_error("cannot install kernel " + f.path,
                      "set LJ_KERNEL_CACHE to a writable directory");
    known_[key] = f;
    ++stats_.compiled;
    for (size_t i : idx) result[i] = f;
  }
  return result;
}

}  // namespace lj::codegen
