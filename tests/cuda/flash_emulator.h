// A host emulation of a CUDA thread block for the flash-attention bodies
// (backends/cuda/flash_attention.h): every thread of the block is an OS thread running the same
// body; __syncthreads and __syncwarp are barriers; shfl_xor and mma.sync exchange the warp's
// registers through shared arrays between two warp barriers (ldmatrix the lanes' row addresses),
// and mma rebuilds A and B from the
// 32 lanes' fragments by the PTX layout (flash_tiles.h) and accumulates each C element in f32 in
// increasing k. Blocks of a grid run one after another, in the order of blockIdx (x fastest), as
// the kernels index them. Shared memory starts as 0xff bytes (NaN in f32 and bf16), so a read of
// what no thread wrote shows up in the results.
#pragma once

#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "backends/cuda/flash_tiles.h"

namespace lj::cuda::flash {

struct HostBlock {
  // `smem_bytes` of shared memory, then a guard of kGuard bytes that a write past the kernel's
  // shared memory would change (guard_intact()).
  static constexpr size_t kGuard = 4096;
  explicit HostBlock(size_t smem_bytes)
      : block(kThreads), bytes((smem_bytes + 15) / 16 * 16), smem((bytes + kGuard) / 16) {
    for (int w = 0; w < kWarps; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
    std::memset(smem.data(), 0xff, bytes);
    std::memset(reinterpret_cast<unsigned char*>(smem.data()) + bytes, 0xab, kGuard);
  }
  bool guard_intact() const {
    const auto* g = reinterpret_cast<const unsigned char*>(smem.data()) + bytes;
    for (size_t i = 0; i < kGuard; ++i)
      if (g[i] != 0xab) return false;
    return true;
  }
  struct alignas(16) Chunk {
    unsigned char b[16];
  };
  std::barrier<> block;
  size_t bytes;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<Chunk> smem;
  uint32_t a[kWarps][32][4] = {};
  uint32_t b[kWarps][32][2] = {};
  float shfl[kWarps][32] = {};
  const uint16_t* rows[kWarps][32] = {};
};

struct HostExec {
  HostBlock* blk;
  int t;
  int64_t* mmas;  // counts this thread's mma calls (lane 0 of each warp adds to the block's)

  int tid() const { return t; }
  char* smem() const { return reinterpret_cast<char*>(blk->smem.data()); }
  void sync() { blk->block.arrive_and_wait(); }
  void sync_warp() { blk->warps[static_cast<size_t>(t >> 5)]->arrive_and_wait(); }
  float shfl_xor(float v, int m) {
    const int w = t >> 5, l = t & 31;
    blk->shfl[w][l] = v;
    sync_warp();
    const float r = blk->shfl[w][l ^ m];
    sync_warp();
    return r;
  }
  void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    const int w = t >> 5, l = t & 31;
    std::memcpy(blk->a[w][l], a, sizeof a);
    std::memcpy(blk->b[w][l], b, sizeof b);
    sync_warp();
    // A(r, k): lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 (k >= 8), half k % 2.
    const auto av = [&](int r, int k) {
      const uint32_t reg =
          blk->a[w][(r % 8) * 4 + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)];
      return to_f32(static_cast<uint16_t>(reg >> (16 * (k & 1))));
    };
    // B(k, n): lane n * 4 + (k % 8) / 2, register k >= 8, half k % 2.
    const auto bv = [&](int k, int n) {
      const uint32_t reg = blk->b[w][n * 4 + (k % 8) / 2][k >= 8 ? 1 : 0];
      return to_f32(static_cast<uint16_t>(reg >> (16 * (k & 1))));
    };
    const int g = l >> 2, tt = l & 3;
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e >= 2 ? 8 : 0), col = 2 * tt + (e & 1);
      float acc = c[e];
      for (int k = 0; k < 16; ++k) acc += av(row, k) * bv(k, col);
      c[e] = acc;
    }
    if (l == 0 && mmas != nullptr) ++*mmas;
    sync_warp();
  }
  // ldmatrix.x4: lane l gives row l % 8 of matrix l / 8 (16-byte aligned, as the device needs);
  // register j of lane l gets row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix j, or of
  // its transpose.
  void ldsm(uint32_t (&r)[4], const uint16_t* row, bool trans) {
    const int w = t >> 5, l = t & 31;
    if (reinterpret_cast<uintptr_t>(row) % 16 != 0) {
      std::fprintf(stderr, "ldmatrix: lane %d's row address is not 16-byte aligned\n", l);
      std::abort();
    }
    blk->rows[w][l] = row;
    sync_warp();
    for (int j = 0; j < 4; ++j) {
      if (!trans) {
        const uint16_t* p = blk->rows[w][8 * j + l / 4];
        r[j] = pack_pair(p[2 * (l % 4)], p[2 * (l % 4) + 1]);
      } else {
        const uint16_t* p0 = blk->rows[w][8 * j + 2 * (l % 4)];
        const uint16_t* p1 = blk->rows[w][8 * j + 2 * (l % 4) + 1];
        r[j] = pack_pair(p0[l / 4], p1[l / 4]);
      }
    }
    sync_warp();
  }
  void ldsm_x4(uint32_t (&r)[4], const uint16_t* row) { ldsm(r, row, false); }
  void ldsm_x4_trans(uint32_t (&r)[4], const uint16_t* row) { ldsm(r, row, true); }
  void copy16(void* dst, const void* src) { std::memcpy(dst, src, 16); }
};

// Runs body(exec, x, y, z) for every block of the grid (gx, gy, gz); returns the mma count.
template <class Body>
int64_t run_grid(int gx, int gy, int gz, size_t smem_bytes, const Body& body) {
  int64_t mmas = 0;
  for (int z = 0; z < gz; ++z) {
    for (int y = 0; y < gy; ++y) {
      for (int x = 0; x < gx; ++x) {
        HostBlock blk(smem_bytes);
        std::vector<int64_t> counts(kThreads, 0);
        std::vector<std::thread> threads;
        threads.reserve(kThreads);
        for (int t = 0; t < kThreads; ++t) {
          threads.emplace_back([&, t] {
            HostExec ex{&blk, t, &counts[static_cast<size_t>(t)]};
            body(ex, x, y, z);
          });
        }
        for (auto& th : threads) th.join();
        if (!blk.guard_intact()) {
          std::fprintf(stderr, "block (%d, %d, %d) wrote past its %zu bytes of shared memory\n", x,
                       y, z, blk.bytes);
          std::abort();
        }
        for (int64_t c : counts) mmas += c;
      }
    }
  }
  return mmas;
}

}  // namespace lj::cuda::flash
