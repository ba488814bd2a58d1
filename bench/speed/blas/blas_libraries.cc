// f32 GEMM throughput of oneDNN's dnnl_sgemm against the other CPU BLAS libraries Debian ships
// (OpenBLAS, BLIS), at the shapes ljperf's `small` and wide steps run. One library per process
// (their thread pools spin after a call and would slow each other), best of 7 rounds of about
// 2 GFLOP each. Built and run by blas_libraries.sh.
//
//   blas_libraries LIB   LIB: onednn | <path to a shared library exporting cblas_sgemm>
#include <dlfcn.h>
#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

// CBLAS's enum values, so no cblas.h is needed to call a dlopen'ed cblas_sgemm.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);

struct Shape {
  int m, n, k;
  bool ta, tb;
  const char* name;
};

// (M, N, K) of C = op(A) op(B); "NT" = B transposed (a linear layer's forward).
const Shape kShapes[] = {
    {2048, 288, 288, false, true, "small q/o forward"},
    {2048, 96, 288, false, true, "small k/v forward"},
    {2048, 768, 288, false, true, "small ffn up forward"},
    {2048, 288, 768, false, true, "small ffn down forward"},
    {2048, 288, 768, false, false, "small ffn up dx"},
    {768, 288, 2048, true, false, "small ffn up dW"},
    {256, 512, 288, false, true, "lm-head block logits"},
    {256, 288, 512, false, false, "lm-head block dx"},
    {512, 288, 256, true, false, "lm-head block dW"},
    {2048, 1024, 1024, false, true, "wide q/o forward"},
    {2048, 2816, 1024, false, true, "wide ffn up forward"},
    {1024, 2816, 2048, true, false, "wide ffn up dW"},
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || !strcmp(argv[1], "--help")) {
    fprintf(stderr, "usage: blas_libraries onednn|LIBRARY.so\n");
    return 2;
  }
  CblasSgemm cblas = nullptr;
  const bool onednn = !strcmp(argv[1], "onednn");
  if (!onednn) {
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h) cblas = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    if (!cblas) {
      fprintf(stderr, "blas_libraries: no cblas_sgemm in %s (%s)\n", argv[1], dlerror());
      return 1;
    }
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (const Shape& s : kShapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const double flop = 2.0 * s.m * s.n * s.k;
    const int reps = std::max(1, int(2e9 / flop));
    double best = 1e30;
    for (int round = 0; round < 8; ++round) {  // round 0 warms up and is not counted
      const double t0 = now();
      for (int i = 0; i < reps; ++i) {
        if (onednn) {
          dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda,
                     b.data(), ldb, 0.0f, c.data(), s.n);
        } else {
          cblas(kRowMajor, s.ta ? kTrans : kNoTrans, s.tb ? kTrans : kNoTrans, s.m, s.n, s.k, 1.0f,
                a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n);
        }
      }
      if (round > 0) best = std::min(best, (now() - t0) / reps);
    }
    printf("%-24s %5d %5d %5d %c%c %7.1f\n", s.name, s.m, s.n, s.k, s.ta ? 'T' : 'N',
           s.tb ? 'T' : 'N', flop / best / 1e9);
  }
  return 0;
}
