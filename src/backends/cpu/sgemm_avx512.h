// ljperf's own f32 GEMM for AVX-512 hosts, BLIS-style: the same row-major contract as gemm.h's
//   c (m, n) = alpha * op(a) (m, k) x op(b) (k, n) + beta * c   (beta = 0 never reads c)
// Loops, outermost first: columns in blocks of nc, k in blocks of kc (op(b)'s kc x nc block packed
// into k-major panels of 32 columns), rows in blocks of mc (op(a)'s mc x kc block packed into
// k-major panels of 14 rows), then a 14 x 32 register tile per (row panel, column panel).
// kc is sized so a 32-column B panel fills half of L1, mc so the A block fills half of L2, nc so
// the B block is twice L2 (it lives in L3); the cache sizes come from sysconf.
//
// Determinism: every c element is alpha * (sum over each kc block in increasing k, from zero)
// added to c block by block in increasing k; the k blocks depend only on k and the host's L1, so
// the result does not depend on the thread count or on how rows and columns are split.
//
// Threads: called outside an OpenMP parallel region it splits rows (or columns, when n > m) into
// one contiguous range per thread of omp_get_max_threads(); inside a region it runs on the
// calling thread. Each thread packs into its own buffers, allocated on first use and kept for the
// thread's life (sgemm_avx512_buffer_bytes prices them).
#pragma once

#include <cstdint>

namespace lj::cpu {

// This CPU runs AVX-512F (cpuid, checked once).
bool sgemm_avx512_available();

// Block sizes (elements). kc and mc are upper bounds: k and each thread's rows are cut into
// equal blocks no larger than them.
struct SgemmBlocking {
  int64_t mc = 0, kc = 0, nc = 0;
};
// From this host's L1 and L2 data cache sizes.
SgemmBlocking sgemm_avx512_blocking();

// The GEMM. Requires sgemm_avx512_available(). `blocking`: nullptr for the host's.
void sgemm_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                  const SgemmBlocking* blocking = nullptr);

// bf16 operands (bits), dense row-major (lda = ta ? m : k, ldb = tb ? k : n), widened to f32 as
// they are packed and multiplied with the f32 micro-kernel: every product is exact in f32 and
// the sums run in f32, as in a bf16 dot-product instruction. c (m, n) dense: f32 (c_f32) or bf16,
// rounded once after the whole sum; accumulate: c += instead of c =. Same blocking, threads and
// determinism as sgemm_avx512; a bf16 c also keeps a C buffer per thread (the f32 sum of one row
// block by one column block).
void gemm_bf16_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a,
                      const uint16_t* b, void* c, bool c_f32, bool accumulate,
                      const SgemmBlocking* blocking = nullptr);

// Whether gemm.h's f32 gemm sends this call here (on a host where sgemm_avx512_available() and
// oneDNN runs AVX-512 too: gemm.h gemm_uses_own_sgemm), rather than to oneDNN. `nested`: the call
// runs inside an OpenMP parallel region, on the calling thread alone (the fused loss's blocks,
// matmuls split over a batch). Depends on the shape and `nested` only, never on the thread count,
// so a call's result is the same for any thread count. The rule and its measurements:
// bench/archive/speed.md, sessions 6 and 9.
bool sgemm_avx512_chosen(bool ta, bool tb, int64_t m, int64_t n, int64_t k, bool nested);

// The packing buffers one thread holds after a call of this shape with `threads` threads sharing
// it (threads = 1 inside a parallel region), bytes. They stay allocated for the thread's life,
// each grown to the largest the thread has needed, so a thread holds the largest a_bytes and the
// largest b_bytes over its calls. bf16_out: a gemm_bf16_avx512 call with a bf16 c, which also
// holds c_bytes.
struct SgemmAvx512Buffers {
  int64_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
};
SgemmAvx512Buffers sgemm_avx512_buffer_bytes(int64_t m, int64_t n, int64_t k, int threads,
                                             bool bf16_out = false);

}  // namespace lj::cpu
