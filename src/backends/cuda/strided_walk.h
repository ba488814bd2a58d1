// Strided walks: element i of a dense iteration over `dims` -> two operands' offsets, for the
// CUDA binary ops' broadcast (elementwise.cu) and the copies' strided views (movement.cu). Plain
// host C++ (the unit tests include it).
//
// Seen on an H200 (ncu, llama3.2-1b bf16 eager, 2026-12-04): with a 64-bit divide and modulo per
// dim and element these kernels ran at a fraction of the memory's bandwidth (binary_kernel<bf16>
// 121 ms of a 324 ms step). The host merges dims first, so two dense operands are one dim and a
// row broadcast two, and the device divides in 32 bits when every index fits.
#pragma once

#include <cstdint>

namespace lj::cuda {

// Drops size-1 dims and merges each dim into its outer neighbour where both operands step across
// the two as across one (a[outer] == a[inner] * dims[inner], b likewise; 0 == 0 for a broadcast).
// rank 0 becomes one dim of size 1.
inline void coalesce_walk(int* rank, int64_t* dims, int64_t* a, int64_t* b) {
  int r = 0;
  for (int k = 0; k < *rank; ++k) {
    if (dims[k] == 1) continue;
    dims[r] = dims[k];
    a[r] = a[k];
    b[r] = b[k];
    ++r;
  }
  if (r == 0) {
    dims[0] = 1;
    a[0] = b[0] = 0;
    *rank = 1;
    return;
  }
  int last = 0;
  for (int k = 1; k < r; ++k) {
    if (a[last] == a[k] * dims[k] && b[last] == b[k] * dims[k]) {
      dims[last] *= dims[k];
    } else {
      ++last;
      dims[last] = dims[k];
    }
    a[last] = a[k];
    b[last] = b[k];
  }
  *rank = last + 1;
}

// Whether a walk of n elements whose offsets reach at most `max_offset` may index in 32 bits
// (signed, with room for a grid-stride step past n).
inline bool walk_fits_32(int64_t n, int64_t max_offset) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  return n < kLimit && max_offset < kLimit;
}

// The largest offset a walk reaches from `base` with non-negative `strides`; -1 when a stride is
// negative (the caller then indexes in 64 bits).
inline int64_t walk_max_offset(int rank, const int64_t* dims, const int64_t* strides,
                               int64_t base = 0) {
  int64_t m = base;
  for (int k = 0; k < rank; ++k) {
    if (strides[k] < 0) return -1;
    m += (dims[k] - 1) * strides[k];
  }
  return m;
}

}  // namespace lj::cuda
