// The flash-attention kernels' block bodies (backends/cuda/flash_attention.h) run on the host by
// flash_emulator.h, with the tile sizes, loop order, fragment layouts and roundings of the
// device (bf16 inputs, bf16 P and dS between the two GEMMs of a step, f32 accumulation), against
// the f64 reference (tests/ops/reference.h) and the CPU backend's sdpa / sdpa_backward on the
// same inputs. Shapes cover T = 1, T not a multiple of the 64-row tiles, Tq != Tk, causal and
// not, query heads per kv head 1, 2 and 4, head dims 48, 64 and 128 (and 20, 40: padded to 32
// and 48 with the scalar loads), f32 and bf16. No GPU involved: this checks the kernels' logic
// (tiling, masks, index math, online softmax, the backward's accumulation, the mma fragment
// layout as the PTX ISA documents it), not the compiler or the hardware; tests/cuda/gpu/ does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "backends/cuda/flash_attention.h"
#include "cuda/flash_emulator.h"
#include "ops/op_test_util.h"
#include "ops/reference.h"

namespace lj::cuda::flash {
namespace {

using test::GraphInput;
using test::RefTensor;

struct Case {
  int b, h, g, tq, tk, d;
  bool causal;
  DType dt;
  std::string name() const {
    return "B" + std::to_string(b) + " H" + std::to_string(h) + " G" + std::to_string(g) + " Tq" +
           std::to_string(tq) + " Tk" + std::to_string(tk) + " D" + std::to_string(d) +
           (causal ? " causal " : " full ") + dtype_name(dt);
  }
};

int tiles(int64_t n) {
  return static_cast<int>((n + kBlockRows - 1) / kBlockRows);
}

template <class E>
std::vector<E> to_host(const RefTensor& t) {
  std::vector<E> out(t.data.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = from_f32<E>(static_cast<float>(t.data[i]));
  return out;
}

template <class E>
RefTensor from_host(const std::vector<E>& v, std::vector<int64_t> dims, DType dt) {
  RefTensor t{dt, std::move(dims), std::vector<double>(v.size())};
  for (size_t i = 0; i < v.size(); ++i) t.data[i] = to_f32(v[i]);
  return t;
}

struct Emulated {
  std::vector<RefTensor> outs;  // out, lse, dq, dk, dv
  int64_t forward_mmas = 0;
};

// The launches of flash_attention.cu, emulated: the same grids and block-index mapping.
template <class E, int D>
Emulated emulate(const Case& cs, const std::vector<RefTensor>& in) {
  std::vector<E> q = to_host<E>(in[0]), k = to_host<E>(in[1]), v = to_host<E>(in[2]),
                 dout = to_host<E>(in[3]);
  const E nan = from_f32<E>(std::numeric_limits<float>::quiet_NaN());
  std::vector<E> o(q.size(), nan), dq(q.size(), nan), dk(k.size(), nan), dv(v.size(), nan);
  const size_t rows = static_cast<size_t>(cs.b) * cs.h * cs.tq;
  std::vector<float> lse(rows, std::nanf("")), di(rows, std::nanf(""));
  Params<E> p{};
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.out = o.data();
  p.dout = dout.data();
  p.lse = lse.data();
  p.di = di.data();
  p.o = o.data();
  p.dq = dq.data();
  p.dk = dk.data();
  p.dv = dv.data();
  p.lse_out = lse.data();
  p.di_out = di.data();
  p.h = cs.h;
  p.g = cs.g;
  p.tq = cs.tq;
  p.tk = cs.tk;
  p.d = cs.d;
  p.causal = cs.causal;
  p.vec16 = cs.d == D;  // std::vector's data is 16-byte aligned
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cs.d)));
  p.scale_log2 = p.scale * kLog2e;
  Emulated r;
  const int qt = tiles(cs.tq);
  r.forward_mmas = run_grid(
      qt, cs.h, cs.b, forward_smem_bytes<E, D>(),
      [&](HostExec& x, int bx, int by, int bz) { forward_block<E, D>(x, p, qt - 1 - bx, by, bz); });
  run_grid(tiles(static_cast<int64_t>(rows)), 1, 1, 0, [&](HostExec& x, int bx, int, int) {
    di_block<E>(x, p, bx, static_cast<int64_t>(rows));
  });
  run_grid(qt, cs.h, cs.b, dq_smem_bytes<E, D>(),
           [&](HostExec& x, int bx, int by, int bz) { dq_block<E, D>(x, p, qt - 1 - bx, by, bz); });
  run_grid(tiles(cs.tk), cs.g, cs.b, dkv_smem_bytes<E, D>(),
           [&](HostExec& x, int bx, int by, int bz) { dkv_block<E, D>(x, p, bx, by, bz); });
  const std::vector<int64_t> qd = {cs.b, cs.h, cs.tq, cs.d}, kd = {cs.b, cs.g, cs.tk, cs.d};
  r.outs = {from_host(o, qd, cs.dt), from_host(lse, {cs.b, cs.h, cs.tq}, DType::f32),
            from_host(dq, qd, cs.dt), from_host(dk, kd, cs.dt), from_host(dv, kd, cs.dt)};
  return r;
}

template <class E>
Emulated emulate_d(const Case& cs, const std::vector<RefTensor>& in) {
  if (cs.d <= 32) return emulate<E, 32>(cs, in);
  if (cs.d <= 48) return emulate<E, 48>(cs, in);
  if (cs.d <= 64) return emulate<E, 64>(cs, in);
  return emulate<E, 128>(cs, in);
}

int padded(int d) {
  return d <= 32 ? 32 : d <= 48 ? 48 : d <= 64 ? 64 : 128;
}

// Forward mma count: per (warp, query tile, key tile visited) D/16 x 8 for S and 4 x D/8 for PV.
int64_t expected_forward_mmas(const Case& cs) {
  const int pd = padded(cs.d);
  int64_t pairs = 0;
  for (int qt = 0; qt < tiles(cs.tq); ++qt) {
    const int64_t end = cs.causal ? std::min<int64_t>((qt + 1) * kBlockRows, cs.tk) : cs.tk;
    pairs += (end + kKeyTile - 1) / kKeyTile;
  }
  return pairs * kWarps * (pd / 16 * (kKeyTile / 8) + (kKeyTile / 16) * (pd / 8)) * cs.b * cs.h;
}

struct Tol {
  double atol, rtol;
};

void check(const Case& cs, Tol out, Tol lse, Tol grad) {
  SCOPED_TRACE(cs.name());
  const DType dt = cs.dt;
  // Inputs as the dtype holds them (bf16-rounded for bf16), in [-2, 2] so scores spread.
  std::vector<RefTensor> in = {
      test::random_tensor(dt, {cs.b, cs.h, cs.tq, cs.d}, 100 + cs.d, -2, 2),
      test::random_tensor(dt, {cs.b, cs.g, cs.tk, cs.d}, 200 + cs.tk, -2, 2),
      test::random_tensor(dt, {cs.b, cs.g, cs.tk, cs.d}, 300 + cs.h, -1, 1),
      test::random_tensor(dt, {cs.b, cs.h, cs.tq, cs.d}, 400 + cs.tq, -1, 1)};
  for (RefTensor& t : in)
    for (double& x : t.data) x = ref::round_to(dt, x);
  const Emulated em = dt == DType::bf16 ? emulate_d<uint16_t>(cs, in) : emulate_d<float>(cs, in);
  if (dt == DType::bf16) {
    EXPECT_EQ(em.forward_mmas, expected_forward_mmas(cs));
  }

  ref::SdpaOut f = ref::sdpa(in[0], in[1], in[2], cs.causal, 0.0);
  f.lse.dtype = DType::f32;  // the kernels' lse is f32 for bf16 inputs (graph/infer_contraction)
  const ref::SdpaGrads gr = ref::sdpa_backward(in[0], in[1], in[2], in[3], cs.causal, 0.0);
  const RefTensor* want64[] = {&f.out, &f.lse, &gr.dq, &gr.dk, &gr.dv};
  auto cpu = test::run_graph(
      {{"q", in[0]}, {"k", in[1]}, {"v", in[2]}, {"dout", in[3]}},
      [&](Builder& b, const std::vector<Val>& v) {
        Attrs a;
        a.set("causal", cs.causal);
        std::vector<Val> fwd = b.add(Op::sdpa, {v[0], v[1], v[2]}, a);
        std::vector<Val> bwd =
            b.add(Op::sdpa_backward, {v[0], v[1], v[2], fwd[0], fwd[1], v[3]}, a);
        return std::vector<Val>{fwd[0], fwd[1], bwd[0], bwd[1], bwd[2]};
      },
      test::RunOptions{.threads = 1, .check_repeat = false});
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const char* names[] = {"out", "lse", "dq", "dk", "dv"};
  for (int i = 0; i < 5; ++i) {
    const Tol t = i == 0 ? out : i == 1 ? lse : grad;
    test::ErrorStats s64, scpu;
    EXPECT_TRUE(test::all_close(em.outs[static_cast<size_t>(i)], *want64[i], t.atol, t.rtol, &s64))
        << names[i] << " vs f64 reference";
    EXPECT_TRUE(test::all_close(em.outs[static_cast<size_t>(i)], (*cpu)[static_cast<size_t>(i)],
                                t.atol, t.rtol, &scpu))
        << names[i] << " vs CPU backend";
    std::printf("  %-40s %-4s vs f64: max |err| %.3g rel %.3g   vs CPU: max |err| %.3g rel %.3g\n",
                cs.name().c_str(), names[i], s64.max_abs, s64.max_rel, scpu.max_abs, scpu.max_rel);
  }
}

// Bounds from the errors these cases show (printed per output; worst over all cases, against
// the f64 reference and the CPU backend alike):
// f32 (FMA in f32, another summation order than the CPU's): out 7e-7, lse 1.0e-6, dq dk dv
// 2.4e-6 absolute; about 3x that.
constexpr Tol kF32Out{2e-6, 1e-5}, kF32Lse{3e-6, 1e-6}, kF32Grad{8e-6, 1e-5};
// bf16 (outputs rounded to bf16; P and dS rounded to bf16 before their GEMMs): out 0.0039 (one
// bf16 ulp at |out| < 1), lse 1e-6 (f32), dq 0.0039, dk 0.0078, dv 0.0156 (one ulp at
// |dv| in [2, 4)). The output bound is 1.5 ulp of |out| < 1, the gradients' half an ulp more than
// the one ulp seen at their magnitude.
constexpr Tol kBf16Out{6e-3, 4e-3}, kBf16Lse{3e-6, 1e-6}, kBf16Grad{6e-3, 6e-3};

TEST(FlashEmulation, F32SingleQuery) {
  check({1, 1, 1, 1, 1, 64, true, DType::f32}, kF32Out, kF32Lse, kF32Grad);
  check({1, 2, 1, 1, 1, 64, false, DType::f32}, kF32Out, kF32Lse, kF32Grad);
}

TEST(FlashEmulation, F32CausalGqaRaggedTiles) {
  check({2, 4, 2, 100, 100, 48, true, DType::f32}, kF32Out, kF32Lse, kF32Grad);
  check({1, 4, 1, 130, 130, 64, true, DType::f32}, kF32Out, kF32Lse, kF32Grad);
}

TEST(FlashEmulation, F32FullAttentionTqNotTk) {
  check({1, 2, 2, 70, 33, 128, false, DType::f32}, kF32Out, kF32Lse, kF32Grad);
  check({1, 4, 2, 17, 80, 40, false, DType::f32}, kF32Out, kF32Lse, kF32Grad);
}

TEST(FlashEmulation, Bf16SingleQueryAndPaddedHeadDim) {
  check({1, 1, 1, 1, 1, 64, true, DType::bf16}, kBf16Out, kBf16Lse, kBf16Grad);
  check({1, 2, 1, 5, 5, 20, true, DType::bf16}, kBf16Out, kBf16Lse, kBf16Grad);
}

TEST(FlashEmulation, Bf16CausalGqaRaggedTiles) {
  check({1, 4, 1, 130, 130, 64, true, DType::bf16}, kBf16Out, kBf16Lse, kBf16Grad);
  check({2, 4, 2, 100, 100, 48, true, DType::bf16}, kBf16Out, kBf16Lse, kBf16Grad);
  check({1, 2, 2, 77, 77, 128, true, DType::bf16}, kBf16Out, kBf16Lse, kBf16Grad);
}

TEST(FlashEmulation, Bf16FullAttention) {
  check({1, 2, 1, 64, 64, 48, false, DType::bf16}, kBf16Out, kBf16Lse, kBf16Grad);
  check({1, 4, 2, 70, 33, 128, false, DType::bf16}, kBf16Out, kBf16Lse, kBf16Grad);
}

}  // namespace
}  // namespace lj::cuda::flash
