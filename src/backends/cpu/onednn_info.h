// What oneDNN (the CPU backend's GEMM library) reports about itself: version, threading runtime
// and the instruction set its JIT kernels use on this CPU. Lives here because only
// lj_backend_cpu links oneDNN; callers need not include <dnnl.h>.
#pragma once

#include <string>

namespace lj::cpu {

struct OneDnnInfo {
  std::string version;      // "2.6.3"
  std::string git_hash;     // empty when the build did not record one
  std::string cpu_runtime;  // "OpenMP", "TBB", "sequential", "threadpool" or "unknown"
  std::string cpu_isa;      // effective ISA: "avx2", "avx512_core", ... or "0x…" when unnamed
  bool isa_avx2 = false;    // the effective ISA includes AVX2
  bool isa_avx512 = false;  // the effective ISA includes AVX-512 (core)
  // A matmul primitive on f16 operands can be created on this CPU (oneDNN 2.6 has none: f16
  // GEMMs then run in f32 on widened operands, backends/cpu/widen.cc).
  bool f16_matmul = false;
};

OneDnnInfo onednn_info();

}  // namespace lj::cpu
