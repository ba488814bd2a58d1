// Tier-2 determinism test: a small attention block with its backward pass, big enough that every
// kernel splits work across threads, run twice with the same inputs and 2 threads must give
// bitwise-equal loss and gradients (static partitions, fixed reduction order, no float atomics).
// (Every forward op test also runs its graph twice; see op_test_util.cc.)
#include <cstring>

#include <gtest/gtest.h>

#include "graph/autodiff/autodiff.h"
#include "op_test_util.h"
#include "runtime/executor.h"
#include "runtime/tensor.h"

namespace lj::test {
namespace {

TEST(Determinism, AttentionBlockWithBackwardIsBitwiseRepeatable) {
  constexpr int64_t kB = 2, kT = 37, kC = 64, kH = 4, kG = 2, kD = 16, kV = 101;
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{kB, kT, kC});         // (B, T, C)
  Val labels = b.input("labels", DType::i32, Shape{kB * kT});  // (N)
  Val wq = b.param("wq", DType::f32, Shape{kH * kD, kC});
  Val wk = b.param("wk", DType::f32, Shape{kG * kD, kC});
  Val wv = b.param("wv", DType::f32, Shape{kG * kD, kC});
  Val wo = b.param("wo", DType::f32, Shape{kV, kH * kD});
  auto heads = [&](Val w, int64_t n) {  // (B, T, C) -> (B, n, T, D)
    return permute(reshape(matmul(x, w, false, true), Shape{kB, kT, n, kD}), {0, 2, 1, 3});
  };
  SdpaResult att = sdpa(heads(wq, kH), heads(wk, kG), heads(wv, kG), true);
  Val y = reshape(permute(att.out, {0, 2, 1, 3}), Shape{kB * kT, kH * kD});  // (N, H*D)
  Val logits = log_softmax(matmul(y, wo, false, true), -1);                  // (N, V)
  Val loss = cross_entropy(logits, labels);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  b.output("loss", loss);
  const std::vector<ValueId> wrt = {x.id, wq.id, wk.id, wv.id, wo.id};
  auto grads = append_gradients(&g, loss.id, wrt);
  ASSERT_TRUE(grads.ok()) << grads.status().to_string();
  for (size_t i = 0; i < wrt.size(); ++i) g.add_output("grad" + std::to_string(i), (*grads)[i]);

  Device dev(2);
  std::vector<Tensor> feed;
  uint64_t seed = 1;
  for (ValueId id : g.inputs()) {
    const TypedShape& t = g.type(id);
    const std::vector<int64_t> dims = t.shape.concrete_dims();
    const RefTensor v = t.dtype == DType::i32 ? random_ints(DType::i32, dims, seed++, 0, kV)
                                              : random_tensor(t.dtype, dims, seed++, -0.5, 0.5);
    feed.push_back(Tensor::from_doubles(dev, v.dtype, v.dims, v.data));
  }
  Executor ex(g, dev);
  auto first = ex.run(feed);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = ex.run(feed);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  ASSERT_EQ(first->size(), second->size());
  for (size_t i = 0; i < first->size(); ++i) {
    const Tensor& a = (*first)[i];
    const Tensor& c = (*second)[i];
    ASSERT_EQ(a.bytes(), c.bytes());
    EXPECT_EQ(std::memcmp(a.raw(), c.raw(), a.bytes()), 0)
        << "output " << g.outputs()[i].name << " differs between two identical runs";
  }
}

}  // namespace
}  // namespace lj::test
