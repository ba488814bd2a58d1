// The process's malloc policy and what it costs in resident memory, so that the planner can price
// every block the system allocator hands out (plan/, issue 14).
//
// glibc's malloc serves a request from its heap below M_MMAP_THRESHOLD and with a fresh mmap at
// or above it. By default that threshold is dynamic: each free() of an mmapped block raises it to
// that block's size (up to 32 MiB), and the trim threshold to twice that. A process that once
// frees an 8 MiB block then serves later 8 MiB requests (oneDNN's GEMM packing buffers among them)
// from the heap, where a freed block stays resident until the heap's top is trimmed: the peak RSS
// then depends on the history of frees, and the same run measured 4 MiB apart (bench/plan/hosts/).
// ljperf pins both thresholds at start-up (pin_malloc_thresholds), which turns the dynamic
// adjustment off: every request of kMmapThreshold bytes or more is its own mmap, resident exactly
// while it lives, and its cost is a function of its size alone (block_resident_bytes).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lj {

// glibc's own default initial threshold (128 KiB), now fixed.
inline constexpr size_t kMmapThreshold = size_t{128} << 10;
inline constexpr size_t kPageBytes = 4096;

// mallopt(M_MMAP_THRESHOLD, kMmapThreshold) and mallopt(M_TRIM_THRESHOLD, kMmapThreshold): call
// once, first thing in main(). Returns false when glibc refused (the prediction then carries the
// dynamic threshold's uncertainty).
bool pin_malloc_thresholds();

// Resident bytes of one live block of `bytes` from aligned_alloc / posix_memalign(`alignment`)
// under the pinned thresholds, once every byte was written: glibc's request grows by its chunk
// header (8 B, rounded to 16), `alignment` + 32 B of slack for an aligned block; at or above the
// threshold it is an mmap of that request plus the 8 B mmap header, rounded up to whole pages;
// below, a heap chunk of the size plus its 16 B header (the alignment slack returns to the heap).
int64_t block_resident_bytes(int64_t bytes, int64_t alignment = 64);

// Transparent huge pages, opt-in: LJ_HUGE_PAGES=1 makes the runtime's allocator advise
// MADV_HUGEPAGE over the blocks it takes from the system (where the host's THP mode, "madvise" or
// "always", honours it). A step streams operands of tens of MiB (the LM head's weight, its
// gradient and its chunk of logits), and with 4 KiB pages each page is a TLB miss, which under
// virtualisation walks two page tables. Measured (bench/archive/speed.md) on a 2-core KVM guest:
// session 7 (lever 8), `small` compiled 8-14% less CPU per step with other processes on the
// cores, 1-3% at load 1.6-3.4, the wider model (hidden 1024) 0-4% more; session 9, with a
// layer's GEMMs on ljperf's own GEMM, `small` compiled 1.039x tokens/s and the wider model
// 1.027x (paired medians). But on that guest zeroing fresh huge pages took 3.5-10 s of system
// CPU per GiB (the kernel's clear_page; likely on memory the host had taken back, as free page
// reporting hands it the 2 MiB blocks THP allocates from), against about 0.55 s per GiB of 4 KiB
// pages: the default `ljperf benchmark` took 8.2-8.6 s instead of 5.4, the wider model's 3-step
// run 28-31 s instead of 11. So it stays opt-in, for long runs (as PyTorch's THP_MEM_ALLOC_ENABLE).
// Only the 2 MiB pages wholly inside a block are advised, and a block is written in full before it
// counts as resident (block_resident_bytes), so the resident pricing does not change (peak RSS
// predicted within 0.3% with and without, `small` and the wider model, eager and compiled).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// madvise(MADV_HUGEPAGE) over the whole kHugePageBytes pages inside [p, p + bytes), before any of
// them is touched. Returns the bytes advised: 0 when no whole page fits or the kernel refused
// (no THP support); the block works either way.
size_t advise_huge_pages(void* p, size_t bytes);

// Whether LJ_HUGE_PAGES is set to 1 in the environment now.
bool huge_pages_requested();

}  // namespace lj
