// fused_pointwise (passes/pointwise_fusion + codegen/ + backends/cpu/fused.cc): the interpreter
// and the compiled kernels equal the unfused graph on random inputs with broadcasting, in f32 and
// f64, with reductions; the disk cache hits on a second build; a compiler that fails falls back
// to the interpreter; a new sequence length reuses every kernel. Each test uses its own temporary
// cache directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "graph/builder.h"
#include "passes/dce/dce.h"
#include "passes/pointwise_fusion/pointwise_fusion.h"
#include "runtime/executor.h"
#include "runtime/fused_kernels.h"

namespace lj {
namespace {

namespace fs = std::filesystem;
const Dim kB = Dim::sym('B');
const Dim kT = Dim::sym('T');
constexpr int64_t kC = 40;

// x (B, T, C), w (C), s (B, T, 1). Outputs cover: a broadcasting elementwise DAG with literals,
// a keepdim mean closing a group, a (B, T, 1) chain growing into (B, T, C), max without keepdim,
// a sum with pow_scalar, and an intermediate read outside its group (y).
void build(Graph* g, DType dt) {
  Builder b(g);
  Val x = b.input("x", dt, {kB, kT, kC});
  Val w = b.input("w", dt, {kC});
  Val s = b.input("s", dt, {kB, kT, 1});
  Val y = silu(x * w + 0.5) - exp(s) / sqrt(square(x) + 1e-3);
  Val r = mean(square(y) * x, {-1}, /*keepdim=*/true);
  Val z = rsqrt(r + 1e-5) * x;
  Val m = max(tanh(x) * 2.0, {-1}, /*keepdim=*/false);
  Val q = sum(pow(x * x + 1.0, 1.5), {-1}, /*keepdim=*/true);
  Val e = sigmoid(neg(reciprocal(expand(s, Shape{kB, kT, kC}) + 2.0))) * log(w * w + 1.0);
  b.output("y", y);
  b.output("r", r);
  b.output("z", z);
  b.output("m", m);
  b.output("q", q);
  b.output("e", e);
  ASSERT_TRUE(b.ok()) << b.status().message();
}

std::vector<Tensor> inputs_for(Device& dev, DType dt, int64_t B, int64_t T, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  auto make = [&](std::vector<int64_t> dims) {
    std::vector<double> v(static_cast<size_t>(numel_of(dims)));
    for (double& x : v) x = u(rng);
    return Tensor::from_doubles(dev, dt, dims, v);
  };
  return {make({B, T, kC}), make({kC}), make({B, T, 1})};
}

std::vector<Tensor> run(Executor& ex, const std::vector<Tensor>& in) {
  auto r = ex.run(in);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>{};
}

// Largest |a - b| / (1 + |b|) over every output.
double max_error(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].dims(), b[i].dims());
    const std::vector<double> x = a[i].to_doubles(), y = b[i].to_doubles();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k)
      err = std::max(err, std::fabs(x[k] - y[k]) / (1 + std::fabs(y[k])));
  }
  return err;
}

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op ? 1 : 0;
  return n;
}

void fuse(Graph* g, PointwiseFusionPass* pass) {
  auto changed = pass->run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(DcePass().run(*g).ok());
  ASSERT_TRUE(verify(*g).ok()) << verify(*g).message() << "\n" << print_graph(*g);
}

// A fresh cache directory per test, removed at the end.
struct TempCache {
  fs::path dir;
  TempCache() {
    std::string t = (fs::temp_directory_path() / "lj_kernels_XXXXXX").string();
    dir = mkdtemp(t.data());
  }
  ~TempCache() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  codegen::KernelCacheOptions options(const std::string& cxx = "c++") const {
    codegen::KernelCacheOptions o = codegen::KernelCacheOptions::from_env();
    o.dir = dir.string();
    o.cxx = cxx;
    return o;
  }
};

class FusedPointwise : public ::testing::TestWithParam<DType> {};

TEST_P(FusedPointwise, InterpreterAndCompiledEqualUnfused) {
  const DType dt = GetParam();
  Graph plain, fused;
  build(&plain, dt);
  build(&fused, dt);
  PointwiseFusionPass pass;
  fuse(&fused, &pass);
  // Groups: y's DAG, square*x+mean, r+eps->rsqrt->*x, tanh*2+max, x*x+1->pow->sum, e's DAG.
  EXPECT_GE(pass.fused_groups(), 5);
  EXPECT_EQ(count_op(fused, Op::fused_pointwise), pass.fused_groups());
  for (const Node& n : fused.nodes()) {
    if (n.op != Op::fused_pointwise) continue;
    const std::string& k = n.attrs.s("kernel");
    EXPECT_EQ(k.find("B"), std::string::npos) << "kernel text names a symbol:\n" << k;
  }

  Device dev(2);
  const auto in = inputs_for(dev, dt, 3, 5, 7);
  Executor ex_plain(plain, dev), ex_interp(fused, dev), ex_compiled(fused, dev);
  const auto want = run(ex_plain, in);
  const auto interp = run(ex_interp, in);
  TempCache cache_dir;
  codegen::KernelCache cache(cache_dir.options());
  auto report = compile_kernels(fused, cache, ex_compiled);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->compiled_nodes, report->fused_nodes) << report->to_string();
  EXPECT_EQ(report->cache.compiler_runs, 1);  // every kernel in one compiler run
  EXPECT_EQ(report->cache.compiled, report->unique_kernels);
  const auto compiled = run(ex_compiled, in);
  EXPECT_LT(ex_compiled.kernels_launched(), ex_plain.kernels_launched());

  const double e_interp = max_error(interp, want), e_compiled = max_error(compiled, want);
  std::printf("%s: interpreter error %.3g, compiled error %.3g, kernels %lld -> %lld\n",
              dtype_name(dt), e_interp, e_compiled,
              static_cast<long long>(ex_plain.kernels_launched()),
              static_cast<long long>(ex_compiled.kernels_launched()));
  // Observed f32: interpreter 2.0e-7, compiled 2.2e-7 (libm exp vs the eager polynomial, and the
  // reductions' sums in another order); f64: 4.0e-16 and 6.5e-16 (the sum order). Kernels 38 -> 5.
  const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
  EXPECT_LT(e_interp, tol);
  EXPECT_LT(e_compiled, tol);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedPointwise, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(FusedPointwiseCache, SecondBuildLoadsFromDisk) {
  Graph g;
  build(&g, DType::f32);
  PointwiseFusionPass pass;
  fuse(&g, &pass);
  Device dev(2);
  TempCache dir;
  Executor ex1(g, dev), ex2(g, dev);
  codegen::KernelCache first(dir.options());
  auto r1 = compile_kernels(g, first, ex1);
  ASSERT_TRUE(r1.ok());
  EXPECT_GT(r1->cache.compiled, 0);
  EXPECT_EQ(r1->cache.loaded, 0);
  // A second cache object (a new process, as far as it knows) finds every kernel on disk.
  codegen::KernelCache second(dir.options());
  auto r2 = compile_kernels(g, second, ex2);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->cache.compiled, 0);
  EXPECT_EQ(r2->cache.compiler_runs, 0);
  EXPECT_EQ(r2->cache.loaded, r1->cache.compiled);
  EXPECT_EQ(r2->compiled_nodes, r2->fused_nodes);
  const auto in = inputs_for(dev, DType::f32, 2, 3, 11);
  EXPECT_EQ(max_error(run(ex1, in), run(ex2, in)), 0.0);
}

TEST(FusedPointwiseCache, FailingCompilerFallsBackToTheInterpreter) {
  Graph plain, g;
  build(&plain, DType::f32);
  build(&g, DType::f32);
  PointwiseFusionPass pass;
  fuse(&g, &pass);
  Device dev(2);
  TempCache dir;
  // As LJ_CXX=/bin/false would set it: `--version` fails, so nothing is built.
  ::setenv("LJ_CXX", "/bin/false", 1);
  codegen::KernelCacheOptions o = codegen::KernelCacheOptions::from_env();
  ::unsetenv("LJ_CXX");
  EXPECT_EQ(o.cxx, "/bin/false");
  o.dir = dir.dir.string();
  codegen::KernelCache cache(o);
  Executor ex(g, dev), ex_plain(plain, dev);
  auto r = compile_kernels(g, cache, ex);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->compiled_nodes, 0);
  EXPECT_EQ(r->interpreted_nodes, r->fused_nodes);
  EXPECT_EQ(r->cache.failed, r->unique_kernels);
  // A compiler that runs but fails to compile (a `--version` that works, a build that does not).
  const fs::path fake = dir.dir / "fake_cxx.sh";
  {
    FILE* f = std::fopen(fake.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake 1.0; exit 0; fi\n"
        "echo 'fake: error' >&2; exit 1\n",
        f);
    std::fclose(f);
    fs::permissions(fake, fs::perms::owner_all);
  }
  codegen::KernelCache failing(dir.options(fake.string()));
  Executor ex2(g, dev);
  auto r2 = compile_kernels(g, failing, ex2);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->cache.compiler_runs, 1);
  EXPECT_EQ(r2->compiled_nodes, 0);
  const auto in = inputs_for(dev, DType::f32, 2, 4, 5);
  const auto want = run(ex_plain, in);
  // Observed 2.0e-7 (the interpreter's exp and sum order, as in
  // InterpreterAndCompiledEqualUnfused).
  EXPECT_LT(max_error(run(ex, in), want), 2e-6);
  EXPECT_LT(max_error(run(ex2, in), want), 2e-6);
}

TEST(FusedPointwiseCache, NewSequenceLengthReusesKernels) {
  Graph plain, g, again;
  build(&plain, DType::f32);
  build(&g, DType::f32);
  build(&again, DType::f32);
  PointwiseFusionPass pass;
  fuse(&g, &pass);
  fuse(&again, &pass);
  Device dev(2);
  TempCache dir;
  codegen::KernelCache cache(dir.options());
  Executor ex(g, dev), ex_plain(plain, dev);
  auto r = compile_kernels(g, cache, ex);
  ASSERT_TRUE(r.ok());
  const int64_t compiled = cache.stats().compiled;
  EXPECT_GT(compiled, 0);
  for (int64_t T : {7, 3, 12}) {
    const auto in = inputs_for(dev, DType::f32, 2, T, static_cast<uint64_t>(T));
    // Observed 2.2e-7, as in InterpreterAndCompiledEqualUnfused.
    EXPECT_LT(max_error(run(ex, in), run(ex_plain, in)), 2e-6) << "T=" << T;
  }
  EXPECT_EQ(cache.stats().compiled, compiled);
  // The same graph built again asks for the same kernels: all found in memory, none compiled.
  Executor ex_again(again, dev);
  auto r2 = compile_kernels(again, cache, ex_again);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(cache.stats().compiled, compiled);
  EXPECT_EQ(r2->cache.reused, r2->unique_kernels);
}

TEST(KernelIr, TextRoundTripsAndRejectsBadInput) {
  Graph g;
  build(&g, DType::f64);
  PointwiseFusionPass pass;
  fuse(&g, &pass);
  int seen = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::fused_pointwise) continue;
    auto k = codegen::parse_kernel(n.attrs.s("kernel"));
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_EQ(k->to_text(), n.attrs.s("kernel"));
    ++seen;
  }
  EXPECT_GT(seen, 0);
  EXPECT_FALSE(
      codegen::parse_kernel("lj-kernel 1\ndtype f32\nloop 1\nt0 = input 0\nout t0\n").ok());
  EXPECT_FALSE(
      codegen::parse_kernel("lj-kernel 1\ndtype f32\nloop 1\nin f32 1\nt0 = matmul t0 t0\n").ok());
  EXPECT_FALSE(codegen::parse_kernel("lj-kernel 2\n").ok());
  // bf16 storage: inputs, casts and outputs of an f32 kernel; never of an f64 one.
  const std::string mixed =
      "lj-kernel 1; dtype f32; loop 1; in bf16 1; in f32 1; t0 = input 0; t1 = input 1; "
      "t2 = add t0 t1; t3 = cast t2 bf16; out t3 bf16; out t2";
  auto k = codegen::parse_kernel(mixed);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->to_text(), mixed);
  EXPECT_TRUE(k->mixed_storage());
  EXPECT_EQ(k->output_dtype(0), DType::bf16);
  EXPECT_EQ(k->output_dtype(1), DType::f32);
  EXPECT_FALSE(codegen::parse_kernel("lj-kernel 1; dtype f64; loop 1; in bf16 1; t0 = input 0; "
                                     "out t0")
                   .ok());
  EXPECT_FALSE(codegen::parse_kernel("lj-kernel 1; dtype f32; loop 1; in f32 1; t0 = input 0; "
                                     "t1 = cast t0 i32; out t1")
                   .ok());
}

// bf16 values (mixed precision, passes/autocast): a group of bf16 ops, casts to and from f32 and
// an f32 tail becomes one kernel that loads and stores bf16 and computes in f32, rounding each
// bf16 op's result once as the eager kernels do. With exactly rounded ops only (add, sub, mul,
// neg, square, casts), interpreter and compiled kernels equal the unfused graph bit for bit. (The
// f32 part is one product: the system compiler may contract an f32 a * b + c into an FMA,
// GCC's -ffp-contract=fast default, as in every f32 kernel it builds; bf16 ops are rounded between
// the product and the sum, which leaves nothing to contract.)
TEST(FusedPointwiseBf16, LoadsAndStoresBf16AndEqualsTheEagerBits) {
  Graph plain, fused;
  for (Graph* g : {&plain, &fused}) {
    Builder b(g);
    Val x = b.input("x", DType::bf16, {kB, kT, kC});
    Val w = b.input("w", DType::bf16, {kC});
    Val s = b.input("s", DType::f32, {kB, kT, kC});
    Val y = x * w + square(x) - neg(w);  // bf16, rounded after every op
    Val z = cast(y, DType::f32) * s;     // f32
    Val u = cast(z, DType::bf16) + x;    // back to bf16
    b.output("y", y);                    // read outside as well: an output
    b.output("z", z);
    b.output("u", u);
    ASSERT_TRUE(b.ok()) << b.status().message();
  }
  PointwiseFusionPass pass;
  fuse(&fused, &pass);
  EXPECT_EQ(pass.fused_groups(), 1);
  bool bf16_io = false;
  for (const Node& n : fused.nodes()) {
    if (n.op != Op::fused_pointwise) continue;
    const std::string& k = n.attrs.s("kernel");
    bf16_io = k.find("in bf16") != std::string::npos && k.find("out t") != std::string::npos &&
              k.find(" bf16; ") != std::string::npos;
    EXPECT_EQ(n.attrs.s("out_dtypes"), "bf16 f32 bf16") << k;
  }
  EXPECT_TRUE(bf16_io);
  Device dev(2);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  auto make = [&](DType dt, std::vector<int64_t> dims) {
    std::vector<double> v(static_cast<size_t>(numel_of(dims)));
    for (double& e : v) e = u(rng);
    return Tensor::from_doubles(dev, dt, dims, v);
  };
  const std::vector<Tensor> in{make(DType::bf16, {3, 5, kC}), make(DType::bf16, {kC}),
                               make(DType::f32, {3, 5, kC})};
  Executor ex_plain(plain, dev), ex_interp(fused, dev), ex_compiled(fused, dev);
  const auto want = run(ex_plain, in);
  const auto interp = run(ex_interp, in);
  TempCache cache_dir;
  codegen::KernelCache cache(cache_dir.options());
  auto report = compile_kernels(fused, cache, ex_compiled);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->compiled_nodes, report->fused_nodes) << report->to_string();
  const auto compiled = run(ex_compiled, in);
  EXPECT_LT(ex_compiled.kernels_launched(), ex_plain.kernels_launched());
  ASSERT_EQ(want.size(), 3u);
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(interp[o].dtype(), want[o].dtype());
    ASSERT_EQ(compiled[o].dtype(), want[o].dtype());
    EXPECT_EQ(std::memcmp(interp[o].raw(), want[o].raw(), want[o].bytes()), 0) << "output " << o;
    EXPECT_EQ(std::memcmp(compiled[o].raw(), want[o].raw(), want[o].bytes()), 0) << "output " << o;
  }
}

}  // namespace
}  // namespace lj
