// The memory oneDNN's dnnl_sgemm takes outside ljperf's allocator: its copy-based kernels pack
// blocks of A and B into buffers it mallocs on every call and frees before returning (oneDNN
// 2.x, src/cpu/x64/gemm/gemm_driver.cpp). Under the pinned malloc thresholds
// (runtime/malloc_policy.h) each buffer is an mmap resident exactly while the call runs, so a
// step's peak RSS holds the largest call's buffers on top of everything the allocator keeps.
//
// The model follows the driver's decisions for its f32 kernels on AVX-512 (avx512_core) and AVX2
// hosts, from the shapes alone: the thread count it settles on (tiny GEMMs run on one thread),
// the no-copy kernels (no buffer), and for the copy-based ones the partition (rows, columns,
// 2-D, or one A copy shared by every thread), the blocking (AVX-512: um 48, bm 9984, bn 384,
// bk 384; AVX2: um 24, bm 10000, bn 384, bk 192) and which pages the packing touches. Checked
// against oneDNN 2.6.3's own allocations (an LD_PRELOAD trace of posix_memalign) on an AVX-512
// host, shapes of the random validation set: exact for the shared copies (e.g. 1280 x 16666 x
// 128: 8,556,544 B) and within 2 KiB per thread for the rest. AVX2: against the isolated
// measurements on the AMD EPYC host (bench/archive/plan.md: small's LM head adds 14 MiB of
// VmHWM above 384 rows, 2.7-4.4 MiB up to 384, 14 MiB at N 64000, 7 MiB at N 8000): the model
// gives 11.4, 0.5, 11.4 and 4.8 MiB, the same steps ~2.5 MiB lower (the isolated figures include
// the first call's JIT kernels, which a training process holds in its baseline). Other ISAs:
// nullopt, and the planner falls back to the fitted `gemm_pack_bytes` (plan/coefficients.h).
#pragma once

#include <cstdint>
#include <optional>

#include "graph/ir.h"

namespace lj {

// One row-major call as the CPU kernels make it: c (m, n) = op(a) (m, k) op(b) (k, n).
struct SgemmShape {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
};

// The ISA oneDNN's sgemm kernels run (backends/cpu/onednn_info.h).
enum class SgemmIsa { avx512_core, avx2, other };

// Resident bytes oneDNN's buffers hold during the call on `threads` threads (all threads'
// buffers together: they live at the same time). nullopt for an ISA the model does not cover.
std::optional<int64_t> sgemm_buffer_bytes(const SgemmShape& s, int threads, SgemmIsa isa);

// The largest of those over every f32 GEMM the graph's nodes make, plus, on AVX-512, the packing
// buffers ljperf's own GEMM keeps per thread for the shapes gemm.h sends it
// (backends/cpu/sgemm_avx512.h: the largest A and B buffer over those calls, on every thread)
// (matmul, matmul_add, the fused linear cross-entropy's chunked GEMMs), as the CPU kernels issue
// them (backends/cpu/matmul.cc: one GEMM over the batch rows, or one per matrix; per-matrix GEMMs
// spread over the threads run single-threaded, `threads` of them at once).
// bf16_own: bf16 GEMMs run on the own GEMM too (backends/cpu/gemm.h gemm_bf16_uses_own), each
// thread keeping its A, B and, for bf16 outputs, C buffers (the fused loss's too); else they run
// on oneDNN's matmul primitive, which this model does not price.
std::optional<int64_t> graph_sgemm_buffer_bytes(const Graph& g, const SymEnv& env, int threads,
                                                SgemmIsa isa, bool bf16_own = false);

// The same for this host: the ISA oneDNN's kernels run (backends/cpu/onednn_info.h), and bf16_own
// as backends/cpu/gemm.h gemm_bf16_uses_own decides.
std::optional<int64_t> host_graph_sgemm_buffer_bytes(const Graph& g, const SymEnv& env,
                                                     int threads);

}  // namespace lj
