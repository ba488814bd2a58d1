// The planner's model of oneDNN's sgemm buffers (probe/sgemm_buffers.h) and glibc's price of a
// block (runtime/malloc_policy.h), against what oneDNN 2.6.3 held resident on an AVX-512 host
// and on the same host limited to AVX2 (bench/plan/sgemm_trace/), 2 threads, sizes in bytes.
#include <gtest/gtest.h>

#include "backends/cpu/sgemm_avx512.h"
#include "graph/builder.h"
#include "probe/sgemm_buffers.h"
#include "runtime/malloc_policy.h"

namespace lj {
namespace {

TEST(MallocPolicyTest, BlocksArePricedByTheirSize) {
  // Heap (below the pinned 128 KiB threshold): the size plus glibc's 16-byte header.
  EXPECT_EQ(block_resident_bytes(512), 528);
  EXPECT_EQ(block_resident_bytes(64 * 1024), 64 * 1024 + 16);
  // mmapped: whole pages, one more when the headers spill over a page boundary.
  EXPECT_EQ(block_resident_bytes(1 << 20), (1 << 20) + 4096);
  EXPECT_EQ(block_resident_bytes((1 << 20) - 512), 1 << 20);
  EXPECT_EQ(block_resident_bytes(0), 0);
}

struct Traced {
  SgemmShape s;
  int64_t avx512, avx2;  // resident bytes of the call's buffers, per ISA
};

// Resident bytes of oneDNN 2.6.3's buffers during the second call of each shape, 2 threads, one
// process per shape, on an Intel Xeon (AVX-512) with oneDNN limited by DNNL_MAX_CPU_ISA for the
// AVX2 column: bench/plan/sgemm_trace/sgemm_trace.sh (posix_memalign interposed, mincore() of
// each mmapped buffer when oneDNN frees it). Resident, not allocated: below K = 128 the blocks
// are sized for 128 rows of K and only K are packed (576 x 28075 x 48 allocates 10.5 MB and
// touches 3.8 MiB).
TEST(SgemmBuffersTest, MatchesOneDnnResidentTrace) {
  const Traced traced[] = {
      // The validation set's LM heads (row-major: rows, vocab, hidden; b transposed).
      {{false, true, 576, 28075, 48}, 3964928, 4014080},
      {{false, true, 1280, 16666, 128}, 8949760, 8945664},
      {{false, true, 1536, 10383, 112}, 5017600, 5013504},
      {{false, true, 2048, 2827, 80}, 1171456, 1171456},
      {{false, true, 768, 4881, 192}, 4362240, 4358144},
      {{false, true, 2048, 8000, 288}, 10125312, 5070848},
      {{false, true, 1500, 9000, 64}, 2523136, 2523136},
      {{false, true, 3000, 20000, 96}, 8298496, 7995392},
      {{false, true, 1024, 3000, 16}, 196608, 212992},
      // Per-thread A and B blocks (2-D partition), and small K with both layouts.
      {{false, true, 2048, 768, 288}, 1785856, 901120},
      {{false, true, 4096, 640, 32}, 188416, 188416},
      {{false, false, 4096, 640, 32}, 188416, 188416},
      // AVX2 packs all of A once B takes a second column block (above 384 rows here).
      {{false, true, 384, 32000, 288}, 0, 491520},
      {{false, true, 400, 32000, 288}, 0, 11993088},
  };
  for (const Traced& t : traced) {
    for (const SgemmIsa isa : {SgemmIsa::avx512_core, SgemmIsa::avx2}) {
      const auto got = sgemm_buffer_bytes(t.s, 2, isa);
      ASSERT_TRUE(got.has_value());
      const double want = static_cast<double>(isa == SgemmIsa::avx2 ? t.avx2 : t.avx512);
      // Largest difference observed: 176 KiB (576 x 28075 x 48 on AVX-512: the modelled offset
      // vectors and page rounding of 3 buffers); 48 pages leaves room for neither a missed
      // block (>= 470 KiB here) nor the untouched K padding.
      EXPECT_NEAR(static_cast<double>(*got), want, 48 * 4096.0)
          << t.s.m << " x " << t.s.n << " x " << t.s.k << (isa == SgemmIsa::avx2 ? " avx2" : "");
    }
  }
}

// 2048 x 32000 x 288 on AVX-512: oneDNN also allocates two 504,320-byte blocks the model does
// not know of (traced resident 24,813,568 B, modelled 24,084,480 B: 0.70 MiB low, 2.9%).
TEST(SgemmBuffersTest, SmallLmHeadOnAvx512IsWithinItsKnownGap) {
  const auto got = sgemm_buffer_bytes({false, true, 2048, 32000, 288}, 2, SgemmIsa::avx512_core);
  ASSERT_TRUE(got.has_value());
  EXPECT_LE(*got, 24813568);
  EXPECT_GE(*got, 24813568 - 2 * 504320 - 4 * 4096);
}

TEST(SgemmBuffersTest, NoCopyKernelsTakeNoBuffer) {
  // Traced: only oneDNN's 73,984-byte per-thread scratch (heap, below the threshold).
  const SgemmShape none[] = {{false, true, 512, 32000, 288},  {false, true, 384, 32000, 288},
                             {false, true, 192, 11696, 512},  {false, false, 1280, 128, 16666},
                             {true, false, 16666, 128, 1280}, {false, true, 2048, 288, 768}};
  for (const SgemmShape& s : none) {
    const auto got = sgemm_buffer_bytes(s, 2, SgemmIsa::avx512_core);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, 0) << s.m << " x " << s.n << " x " << s.k;
  }
}

TEST(SgemmBuffersTest, OtherIsasAreNotModelled) {
  EXPECT_FALSE(sgemm_buffer_bytes({false, true, 2048, 32000, 288}, 2, SgemmIsa::other).has_value());
}

// A weight gradient (768 x 288 x 2048, aᵀ b) goes to ljperf's own GEMM on AVX-512: its packing
// buffers are priced on every thread, instead of oneDNN's per-call ones.
TEST(SgemmBuffersTest, OwnGemmBuffersArePricedOnEveryThread) {
  ASSERT_TRUE(cpu::sgemm_avx512_chosen(true, false, 768, 288, 2048, false));
  Graph g;
  Builder b(&g);
  Val dy = b.input("dy", DType::f32, Shape{2048, 768});  // (N, out)
  Val x = b.input("x", DType::f32, Shape{2048, 288});    // (N, in)
  b.output("dw", matmul(dy, x, true, false));            // (out, in)
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const SymEnv env;
  const cpu::SgemmAvx512Buffers own = cpu::sgemm_avx512_buffer_bytes(768, 288, 2048, 2);
  ASSERT_GT(own.a_bytes, 0);
  ASSERT_GT(own.b_bytes, 0);
  const auto got = graph_sgemm_buffer_bytes(g, env, 2, SgemmIsa::avx512_core);
  ASSERT_TRUE(got.has_value());
  // Each buffer is one block: its size rounded to whole pages (plus glibc's header page at most).
  const int64_t low = 2 * (own.a_bytes + own.b_bytes);
  EXPECT_GE(*got, low);
  EXPECT_LE(*got, low + 2 * 2 * 2 * 4096);
  // The row split: each of the 2 threads packs at most the A block one thread would, and all of
  // b's k x 288 block.
  const cpu::SgemmAvx512Buffers one = cpu::sgemm_avx512_buffer_bytes(768, 288, 2048, 1);
  EXPECT_LE(own.a_bytes, one.a_bytes);
  EXPECT_EQ(own.b_bytes, one.b_bytes);
  // On AVX2 the same graph is oneDNN's alone.
  EXPECT_EQ(graph_sgemm_buffer_bytes(g, env, 2, SgemmIsa::avx2),
            sgemm_buffer_bytes({true, false, 768, 288, 2048}, 2, SgemmIsa::avx2));
}

// bf16 GEMMs on the own GEMM (gemm.h gemm_bf16_uses_own): every one is priced, a bf16 output with
// its C buffer too; on oneDNN's matmul primitive they are not priced.
TEST(SgemmBuffersTest, Bf16GemmsOnTheOwnGemmKeepACBufferForBf16Outputs) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::bf16, Shape{2048, 288});
  Val w = b.input("w", DType::bf16, Shape{768, 288});
  b.output("y", matmul(x, w, false, true));  // (2048, 768) bf16
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const SymEnv env;
  const cpu::SgemmAvx512Buffers own = cpu::sgemm_avx512_buffer_bytes(2048, 768, 288, 2, true);
  ASSERT_GT(own.c_bytes, 0);
  EXPECT_EQ(cpu::sgemm_avx512_buffer_bytes(2048, 768, 288, 2, false).c_bytes, 0);
  const auto got = graph_sgemm_buffer_bytes(g, env, 2, SgemmIsa::avx512_core, true);
  ASSERT_TRUE(got.has_value());
  const int64_t low = 2 * (own.a_bytes + own.b_bytes + own.c_bytes);
  EXPECT_GE(*got, low);
  EXPECT_LE(*got, low + 2 * 3 * 2 * 4096);
  EXPECT_EQ(graph_sgemm_buffer_bytes(g, env, 2, SgemmIsa::avx512_core, false), 0);
}

}  // namespace
}  // namespace lj
