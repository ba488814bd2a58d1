// What oneDNN's dnnl_sgemm holds resident while it runs, for the planner's buffer model
// (src/probe/sgemm_buffers.h, tests/unit/sgemm_buffers_test.cc). The process interposes
// posix_memalign and free: every buffer of the second call of each shape is recorded, and when
// oneDNN frees one of 128 KiB or more (an mmap under the pinned thresholds ljperf runs with,
// runtime/malloc_policy.h) mincore() counts the pages the call touched. Prints, per shape, the
// allocations and the resident bytes. Run one shape per process: a process's earlier calls
// change what later ones reuse.
//
//   sgemm_trace TA TB M N K   (row-major c (M, N) = op(a) op(b), TA/TB: N or T)
#include <dlfcn.h>
#include <dnnl.h>
#include <malloc.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace {

constexpr size_t kMmapThreshold = 128 * 1024;  // runtime/malloc_policy.h
constexpr uintptr_t kPage = 4096;

volatile bool tracing = false;
thread_local bool in_hook = false;
std::mutex mu;
std::map<void*, size_t>* live;
std::vector<size_t>* sizes;
size_t resident = 0;

size_t resident_pages(void* p, size_t n) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n + kPage - 1) & ~(kPage - 1);
  std::vector<unsigned char> v((e - b) / kPage);
  if (mincore(reinterpret_cast<void*>(b), e - b, v.data()) != 0) return 0;
  size_t r = 0;
  for (unsigned char c : v) r += (c & 1) * kPage;
  return r;
}

}  // namespace

extern "C" int posix_memalign(void** p, size_t align, size_t n) {
  static auto real =
      reinterpret_cast<int (*)(void**, size_t, size_t)>(dlsym(RTLD_NEXT, "posix_memalign"));
  const int r = real(p, align, n);
  if (tracing && r == 0 && !in_hook) {
    in_hook = true;
    {
      std::lock_guard<std::mutex> g(mu);
      (*live)[*p] = n;
      sizes->push_back(n);
    }
    in_hook = false;
  }
  return r;
}

extern "C" void free(void* p) {
  static auto real = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_NEXT, "free"));
  if (tracing && p != nullptr && !in_hook) {
    in_hook = true;
    {
      std::lock_guard<std::mutex> g(mu);
      auto it = live->find(p);
      if (it != live->end()) {
        if (it->second >= kMmapThreshold) resident += resident_pages(p, it->second);
        live->erase(it);
      }
    }
    in_hook = false;
  }
  real(p);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: sgemm_trace N|T N|T M N K\n");
    return 2;
  }
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kMmapThreshold);
  live = new std::map<void*, size_t>;
  sizes = new std::vector<size_t>;
  const bool ta = argv[1][0] == 'T', tb = argv[2][0] == 'T';
  const int64_t m = std::atol(argv[3]), n = std::atol(argv[4]), k = std::atol(argv[5]);
  std::vector<float> a(size_t(m * k), 0.1f), b(size_t(k * n), 0.1f), c(size_t(m * n));
  for (int call = 0; call < 2; ++call) {
    tracing = call == 1;
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a.data(), ta ? m : k, b.data(),
               tb ? k : n, 0.0f, c.data(), n);
    tracing = false;
  }
  std::printf("%c%c %ld x %ld x %ld: resident %zu B (%.2f MiB); allocations:", ta ? 'T' : 'N',
              tb ? 'T' : 'N', static_cast<long>(m), static_cast<long>(n), static_cast<long>(k),
              resident, resident / 1048576.0);
  for (size_t s : *sizes) std::printf(" %zu", s);
  std::printf("\n");
  return 0;
}
