// The C++ renderer: one OpenMP-parallel function per kernel, for the system compiler
// (codegen/kernel_cache.h builds and loads it). The loop is (rows, inner): tasks are blocks of
// one row, spread over threads with a static schedule; the inner loop is `#pragma omp simd`, with
// inputs that span the inner dim read contiguously and broadcast ones hoisted. A reduction keeps
// one row per task and accumulates sums in f64 (as the eager kernels do). f32 exp (and silu,
// sigmoid) use the same polynomial as the eager kernels (backends/cpu/simd.h), written scalar so
// the compiler vectorises it; everything else is the compiler's builtin.
#pragma once

#include "codegen/renderer.h"

namespace lj::codegen {

class CppRenderer final : public Renderer {
 public:
  const char* name() const override { return "cpp"; }
  RenderedKernel render(const Kernel& k, const std::string& entry) const override;
  std::string prelude() const override;
};

}  // namespace lj::codegen
