// Compiled kernels for a graph's fused_pointwise nodes (passes/pointwise_fusion): renders every
// node's kernel IR with the C++ renderer, builds what the disk cache lacks in one compiler run
// (codegen/kernel_cache.h) and installs the entries in an Executor as per-node kernels. Done once
// per graph, when the executor is made, never per step; the loop dims are run-time arguments, so
// a new B or T reuses every kernel. A node whose kernel could not be built keeps the CPU
// interpreter (backends/cpu/fused.cc): the cache has already logged one warning.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/kernel_cache.h"
#include "runtime/executor.h"

namespace lj {

struct FusedKernelReport {
  int64_t fused_nodes = 0;     // fused_pointwise nodes in the graph
  int64_t unique_kernels = 0;  // distinct kernel texts among them
  int64_t compiled_nodes = 0;  // nodes that run a compiled kernel
  int64_t interpreted_nodes = 0;
  codegen::KernelCacheStats cache;  // the cache's counters after this call
  double wall_s = 0;
  std::string to_string() const;  // one line
};

// Errors only for a kernel text that does not parse (a broken pass); build failures fall back.
StatusOr<FusedKernelReport> compile_kernels(const Graph& g, codegen::KernelCache& cache,
                                            Executor& ex);

}  // namespace lj
