// Tier-2 tests of the ops pattern fusion makes for the loss and the residual adds:
// linear_cross_entropy and matmul_add, in f32 and f64, against the primitive subgraph
// they replace (matmul + cross_entropy, matmul + add) with gradients from append_gradients, and
// against the reference kernels composed (ref::matmul, ref::cross_entropy(_backward)).
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gemm.h"
#include "graph/autodiff/autodiff.h"
#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;

// Appends d(loss)/d(wrt...) to the builder's graph and returns them as Vals.
std::vector<Val> grads_of(Builder& b, Val loss, std::vector<Val> wrt) {
  std::vector<ValueId> ids;
  for (const Val& v : wrt) ids.push_back(v.id);
  auto g = append_gradients(&b.graph(), loss.id, ids);
  if (!g.ok()) {
    b.fail(g.status());
    return std::vector<Val>(wrt.size());
  }
  std::vector<Val> out;
  for (ValueId id : *g) out.push_back(b.val(id));
  return out;
}

struct LceCase {
  int64_t n, c, v;
  int64_t chunk;  // rows per chunk; 0: the kernel's own choice
  DType label_dtype;
  int64_t ignore_index;
  int64_t num_ignored;  // rows whose label is set to ignore_index
};

const std::vector<LceCase>& lce_cases() {
  static const std::vector<LceCase> kCases = {
      {37, 16, 50, 8, DType::i32, -100, 5},    // chunk 8 does not divide 37; ignored rows
      {37, 16, 50, 0, DType::i64, -100, 3},    // the default chunk (256 rows): one chunk
      {300, 8, 40, 0, DType::i32, -100, 20},   // the default chunk: 256 + 44 rows
      {5, 7, 1001, 2, DType::i32, 3, 0},       // custom ignore_index that is also a valid id
      {64, 33, 129, 64, DType::i64, -100, 0},  // chunk == N
      {6, 4, 9, 1, DType::i32, -100, 6},       // every row ignored: loss NaN, gradients zero
  };
  return kCases;
}

RefTensor lce_labels(const LceCase& c, uint64_t seed) {
  RefTensor labels = random_ints(c.label_dtype, {c.n}, seed, 0, c.v);
  for (int64_t i = 0; i < c.num_ignored; ++i)
    labels[(i * 7) % c.n] = static_cast<double>(c.ignore_index);
  return labels;
}

std::string lce_name(DType dt, const LceCase& c) {
  return std::string("linear_cross_entropy ") + dtype_name(dt) + " N=" + std::to_string(c.n) +
         " C=" + std::to_string(c.c) + " V=" + std::to_string(c.v) +
         " chunk=" + std::to_string(c.chunk) + " ignore_index=" + std::to_string(c.ignore_index);
}

// Loss and gradients of the fused op and of matmul + cross_entropy, both from append_gradients
// with dloss = 1.7 (the fused VJP scales the forward's dx, dw by it): equal within rounding.
TEST(Fused, LinearCrossEntropyEqualsMatmulCrossEntropy) {
  uint64_t seed = 1;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const LceCase& c : lce_cases()) {
      const RefTensor x = random_tensor(dt, {c.n, c.c}, seed++, -1, 1);
      const RefTensor w = random_tensor(dt, {c.v, c.c}, seed++, -1, 1);
      const RefTensor labels = lce_labels(c, seed++);
      const std::vector<GraphInput> inputs{{"x", x}, {"w", w}, {"labels", labels}};
      auto fused = run_graph(inputs, [&](Builder& b, const std::vector<Val>& in) {
        const Val loss = linear_cross_entropy(in[0], in[1], in[2], c.ignore_index, c.chunk).loss;
        std::vector<Val> out{loss};
        for (Val g : grads_of(b, loss * 1.7, {in[0], in[1]})) out.push_back(g);
        return out;
      });
      auto prim = run_graph(inputs, [&](Builder& b, const std::vector<Val>& in) {
        Val loss = cross_entropy(matmul(in[0], in[1], false, true), in[2], c.ignore_index);
        std::vector<Val> out{loss};
        for (Val g : grads_of(b, loss * 1.7, {in[0], in[1]})) out.push_back(g);
        return out;
      });
      const std::string what = lce_name(dt, c);
      ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().to_string();
      ASSERT_TRUE(prim.ok()) << what << ": " << prim.status().to_string();
      const RefTensor& loss = (*fused)[0];
      const RefTensor& dx = (*fused)[1];
      const RefTensor& dw = (*fused)[2];
      // Logits are sums of C <= 33 products of values in [-1, 1], |logit| <= 33, the loss
      // O(log V + 33). f32: chunked GEMMs and dw summed chunk by chunk give a few ulp of the
      // loss (rtol 1e-5) and of each gradient entry, a sum of up to V (dx) or N (dw) terms of
      // size <= 1.7 |w| / N_valid (atol 1e-6, rtol 1e-4). f64: 1e-13 and 1e-12.
      // Observed (LJ_OPS_VERBOSE=1): f32 loss abs 4.8e-7 (rel 6.5e-8), dx abs 2.4e-7, dw abs
      // 3.0e-8 on an AVX-512 host (loss_fused_avx512.h; on gemm.h's GEMMs the loss was bitwise,
      // dx 2.1e-7, dw 6.0e-8); f64 gradients 4.4e-16.
      expect_close(loss, (*prim)[0], by_dtype(dt, 1e-6, 1e-14), by_dtype(dt, 1e-5, 1e-13),
                   what + " loss");
      expect_close(dx, (*prim)[1], by_dtype(dt, 1e-6, 1e-14), by_dtype(dt, 1e-4, 1e-12),
                   what + " dx");
      expect_close(dw, (*prim)[2], by_dtype(dt, 1e-6, 1e-14), by_dtype(dt, 1e-4, 1e-12),
                   what + " dw");
      if (c.num_ignored == c.n) {
        EXPECT_TRUE(std::isnan(loss[0])) << what;
        for (double g : dx.data) ASSERT_EQ(g, 0.0) << what;
        for (double g : dw.data) ASSERT_EQ(g, 0.0) << what;
      }
    }
  }
}

// The op's own dx, dw outputs (the gradients for dloss = 1) against the composed reference:
// dlogits = cross_entropy_backward(x w^T, labels, 1), dx = dlogits w, dw = dlogits^T x.
TEST(Fused, LinearCrossEntropyOutputsMatchReference) {
  uint64_t seed = 100;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const LceCase& c : lce_cases()) {
      const RefTensor x = random_tensor(dt, {c.n, c.c}, seed++, -1, 1);
      const RefTensor w = random_tensor(dt, {c.v, c.c}, seed++, -1, 1);
      const RefTensor labels = lce_labels(c, seed++);
      auto r = run_graph({{"x", x}, {"w", w}, {"labels", labels}},
                         [&](Builder&, const std::vector<Val>& in) {
                           const LinearCrossEntropyResult o =
                               linear_cross_entropy(in[0], in[1], in[2], c.ignore_index, c.chunk);
                           return std::vector<Val>{o.loss, o.dx, o.dw};
                         });
      const std::string what = lce_name(dt, c) + " outputs";
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      const RefTensor logits = ref::matmul(x, w, false, true);
      const RefTensor one = make_tensor(dt, {}, {1.0});
      const RefTensor dlogits = ref::cross_entropy_backward(logits, labels, one, c.ignore_index);
      // As above with dloss = 1. Observed: f32 loss bitwise, dx abs 2.2e-8, dw abs 1.5e-8 on an
      // AVX-512 host (on gemm.h's GEMMs 4.8e-7, 2.1e-7, 1.5e-8); f64 loss bitwise, gradients
      // abs 1.1e-16.
      expect_close((*r)[0], rounded(ref::cross_entropy(logits, labels, c.ignore_index), dt),
                   by_dtype(dt, 1e-6, 1e-14), by_dtype(dt, 1e-5, 1e-13), what + " loss");
      expect_close((*r)[1], rounded(ref::matmul(dlogits, w, false, false), dt),
                   by_dtype(dt, 2e-6, 1e-14), by_dtype(dt, 1e-4, 1e-12), what + " dx");
      expect_close((*r)[2], rounded(ref::matmul(dlogits, x, true, false), dt),
                   by_dtype(dt, 2e-6, 1e-14), by_dtype(dt, 1e-4, 1e-12), what + " dw");
    }
  }
}

// f64 sums every dot product in one order and dw over chunks in row order: one thread and
// four give the same bits.
TEST(Fused, LinearCrossEntropyF64IsThreadCountInvariant) {
  const RefTensor x = random_tensor(DType::f64, {45, 12}, 7);
  const RefTensor w = random_tensor(DType::f64, {70, 12}, 8);
  const RefTensor labels = random_ints(DType::i32, {45}, 9, 0, 70);
  auto build = [](Builder& b, const std::vector<Val>& in) {
    const LinearCrossEntropyResult r = linear_cross_entropy(in[0], in[1], in[2], -100, 8);
    std::vector<Val> out{r.loss};
    for (Val g : grads_of(b, r.loss, {in[0], in[1]})) out.push_back(g);
    return out;
  };
  const std::vector<GraphInput> inputs{{"x", x}, {"w", w}, {"labels", labels}};
  auto one = run_graph(inputs, build, RunOptions{1, true});
  auto four = run_graph(inputs, build, RunOptions{4, true});
  ASSERT_TRUE(one.ok() && four.ok());
  for (size_t k = 0; k < one->size(); ++k) {
    EXPECT_EQ((*one)[k].data, (*four)[k].data) << "output " << k;
  }
}

// The f32 kernel's vocabulary blocks (the `vocab_block` attribute; default 512 columns, 1024 from
// a hidden size of 512): block
// widths that divide V, leave a short last block, are one column, V itself or wider, against the
// composed reference, on 1 and 3 threads. The loss and dw come out bitwise the same on both
// thread counts (each block's GEMMs and each row's statistics run on one thread, in a fixed
// order); dx sums per-thread partials, so it only has to agree within rounding.
// On an AVX-512 host this is the kernel built from the own GEMM's pieces (loss_fused_avx512.h):
// C = 16 reads w's rows in place, 512 packs them (a row every 32 lines, all in one L1 set); C = 512
// and 511 split the logits' k into blocks, the chunks of 400 and 500 rows dw's, and 500 rows
// exceed a B block's columns. per_block_gemms: the kernel on gemm.h's GEMMs instead (the node
// attribute), the one every host without AVX-512 runs.
void check_vocab_blocks(bool per_block_gemms) {
  struct BlockCase {
    int64_t n, c, v, chunk, block;
    int64_t num_ignored;
  };
  const BlockCase cases[] = {
      {37, 16, 700, 8, 0, 5},    // the default block (512): 512 + 188 columns
      {37, 16, 300, 0, 100, 0},  // blocks divide V
      {37, 16, 303, 16, 7, 3},   // 43 blocks of 7 and one of 2
      {40, 9, 50, 13, 1, 2},     // one column per block
      {33, 5, 70, 0, 70, 1},     // one block of all V
      {33, 5, 70, 5, 500, 0},    // wider than V: clamped to V
      {20, 17, 1000, 0, 96, 4},  // 11 blocks of 96, the last of 40
      {19, 512, 1500, 8, 0, 3},  // the wide default (1024): 1024 + 476 columns
      {19, 511, 1500, 8, 0, 3},  // just below it: blocks of 512, the last of 476
      {450, 8, 50, 400, 0, 6},   // chunks of 400 rows and 50
      {520, 8, 60, 500, 0, 6},   // chunks of 500 rows and 20
  };
  uint64_t seed = 700;
  for (const BlockCase& bc : cases) {
    const LceCase c{bc.n, bc.c, bc.v, bc.chunk, DType::i32, -100, bc.num_ignored};
    const RefTensor x = random_tensor(DType::f32, {c.n, c.c}, seed++, -1, 1);
    const RefTensor w = random_tensor(DType::f32, {c.v, c.c}, seed++, -1, 1);
    const RefTensor labels = lce_labels(c, seed++);
    auto build = [&](Builder& b, const std::vector<Val>& in) {
      const LinearCrossEntropyResult o =
          linear_cross_entropy(in[0], in[1], in[2], c.ignore_index, c.chunk);
      for (Node& node : b.graph().mutable_nodes()) {
        if (node.op != Op::linear_cross_entropy) continue;
        node.attrs.set("vocab_block", bc.block);
        if (per_block_gemms) node.attrs.set("per_block_gemms", int64_t{1});
      }
      return std::vector<Val>{o.loss, o.dx, o.dw};
    };
    const std::vector<GraphInput> inputs{{"x", x}, {"w", w}, {"labels", labels}};
    auto one = run_graph(inputs, build, RunOptions{1, true});
    auto three = run_graph(inputs, build, RunOptions{3, true});
    const std::string what = lce_name(DType::f32, c) + " vocab_block=" + std::to_string(bc.block);
    ASSERT_TRUE(one.ok()) << what << ": " << one.status().to_string();
    ASSERT_TRUE(three.ok()) << what << ": " << three.status().to_string();
    const RefTensor logits = ref::matmul(x, w, false, true);
    const RefTensor unit = make_tensor(DType::f32, {}, {1.0});
    const RefTensor dlogits = ref::cross_entropy_backward(logits, labels, unit, c.ignore_index);
    for (const auto* r : {&*one, &*three}) {
      // The bounds of LinearCrossEntropyOutputsMatchReference (the same sizes of sums).
      // Observed (LJ_OPS_VERBOSE=1): loss abs 1.9e-6 (rel 6.8e-8, at C = 512), dx abs 3.3e-7,
      // dw abs 2.0e-7 on an AVX-512 host; with oneDNN at AVX2 4.8e-7, 3.3e-7, 1.9e-7.
      expect_close((*r)[0], rounded(ref::cross_entropy(logits, labels, c.ignore_index), DType::f32),
                   1e-6, 1e-5, what + " loss");
      expect_close((*r)[1], rounded(ref::matmul(dlogits, w, false, false), DType::f32), 2e-6, 1e-4,
                   what + " dx");
      expect_close((*r)[2], rounded(ref::matmul(dlogits, x, true, false), DType::f32), 2e-6, 1e-4,
                   what + " dw");
    }
    EXPECT_EQ((*one)[0].data, (*three)[0].data) << what << " loss, 1 vs 3 threads";
    EXPECT_EQ((*one)[2].data, (*three)[2].data) << what << " dw, 1 vs 3 threads";
  }
}

TEST(Fused, LinearCrossEntropyVocabBlocksMatchReference) {
  check_vocab_blocks(false);
}

TEST(Fused, LinearCrossEntropyPerBlockGemmsMatchReference) {
  check_vocab_blocks(true);
}

// With oneDNN capped below AVX-512 the own GEMM is off and the default is the kernel on gemm.h's
// GEMMs, all of them oneDNN's AVX2 ones.
TEST(Fused, LinearCrossEntropyOnOneDnnAvx2MatchesReference) {
  // oneDNN reads DNNL_MAX_CPU_ISA once, on first use: ctest runs each test in its own process.
  setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
  if (cpu::own_sgemm_enabled())
    GTEST_SKIP() << "oneDNN was initialized before the cap (run this test in its own process)";
  check_vocab_blocks(false);
}

// The block width the kernel takes (cpu.h): 512 columns below a hidden size of 512, 1024 from
// there, an attribute wins, and never more than the vocabulary.
TEST(Fused, LinearCrossEntropyVocabBlockRule) {
  const Attrs none;
  EXPECT_EQ(cpu::linear_cross_entropy_vocab_block(none, 32000, 288), 512);
  EXPECT_EQ(cpu::linear_cross_entropy_vocab_block(none, 32000, 511), 512);
  EXPECT_EQ(cpu::linear_cross_entropy_vocab_block(none, 32000, 512), 1024);
  EXPECT_EQ(cpu::linear_cross_entropy_vocab_block(none, 700, 1024), 700);
  const Attrs set{{"vocab_block", int64_t{96}}};
  EXPECT_EQ(cpu::linear_cross_entropy_vocab_block(set, 32000, 1024), 96);
}

TEST(Fused, LinearCrossEntropyLabelOutOfRangeIsAStatus) {
  const RefTensor x = random_tensor(DType::f32, {6, 4}, 200);
  const RefTensor w = random_tensor(DType::f32, {11, 4}, 201);
  RefTensor labels = random_ints(DType::i32, {6}, 202, 0, 11);
  labels[3] = 11;
  auto r = run_graph({{"x", x}, {"w", w}, {"labels", labels}},
                     [&](Builder&, const std::vector<Val>& in) {
                       return std::vector<Val>{linear_cross_entropy(in[0], in[1], in[2]).loss};
                     });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::out_of_range) << r.status().to_string();
}

struct MatmulAddCase {
  Dims a, b;
  bool ta, tb;
};

// matmul_add(a, b, c) and add(c, matmul(a, b)): the output and the gradients of a, b, c.
TEST(Fused, MatmulAddEqualsMatmulPlusAdd) {
  const std::vector<MatmulAddCase> cases = {
      {{2, 5, 6}, {4, 6}, false, true},        // a linear layer: x (B, T, C_in), w (C_out, C_in)
      {{37, 65}, {65, 29}, false, false},      // 2-D, sizes off any tile
      {{3, 7, 4}, {3, 7, 5}, true, false},     // batched, a transposed: one GEMM per batch
      {{2, 1, 3, 4}, {3, 5, 4}, false, true},  // broadcast batch
  };
  uint64_t seed = 300;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const MatmulAddCase& mc : cases) {
      const RefTensor a = random_tensor(dt, mc.a, seed++);
      const RefTensor b = random_tensor(dt, mc.b, seed++);
      const RefTensor prod = ref::matmul(a, b, mc.ta, mc.tb);
      const RefTensor c = random_tensor(dt, prod.dims, seed++);
      const RefTensor r = random_tensor(dt, prod.dims, seed++);  // weights of the loss
      const std::vector<GraphInput> inputs{{"a", a}, {"b", b}, {"c", c}, {"r", r}};
      auto run = [&](bool fused) {
        return run_graph(inputs, [&](Builder& bl, const std::vector<Val>& in) {
          Val out = fused ? matmul_add(in[0], in[1], in[2], mc.ta, mc.tb)
                          : in[2] + matmul(in[0], in[1], mc.ta, mc.tb);
          Val loss = sum(out * in[3], {});
          std::vector<Val> outs{out};
          for (Val g : grads_of(bl, loss, {in[0], in[1], in[2]})) outs.push_back(g);
          return outs;
        });
      };
      auto got = run(true);
      auto want = run(false);
      const std::string what = std::string("matmul_add ") + dtype_name(dt) + " a" +
                               dims_to_string(mc.a) + " b" + dims_to_string(mc.b) +
                               (mc.ta ? " ta" : "") + (mc.tb ? " tb" : "");
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().to_string();
      ASSERT_TRUE(want.ok()) << what << ": " << want.status().to_string();
      // f32: c + (sum of K <= 65 products) rounded once more or less, |out| <= 66: atol 1e-5.
      // The gradients are the same matmuls on the same operands: expected bitwise, allowed 1e-6.
      // f64 likewise at 1e-13. Observed: 0 difference everywhere (oneDNN adds c after the dot
      // products, as the separate add does); against the reference f32 2.4e-6 abs at K = 65,
      // f64 3.6e-15.
      expect_close((*got)[0], (*want)[0], by_dtype(dt, 1e-5, 1e-13), 0, what + " out");
      for (size_t k = 1; k < 4; ++k) {
        expect_close((*got)[k], (*want)[k], by_dtype(dt, 1e-6, 1e-13), 0,
                     what + " grad " + std::to_string(k - 1));
      }
      // And the forward against the reference.
      const RefTensor want_out = ref::binary(Op::add, prod, c);
      expect_close((*got)[0], rounded(want_out, dt), by_dtype(dt, 1e-5, 1e-13),
                   by_dtype(dt, 1e-5, 1e-13), what + " vs reference");
    }
  }
}

}  // namespace
}  // namespace lj::test
