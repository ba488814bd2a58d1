// passes/master_weights: 16-bit weight copies as inputs and weight-gradient casts folded into
// their GEMMs, checked on the tiny Llama against the same graph without the pass.
#include "passes/master_weights/master_weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/dtype.h"
#include "model/model_test_util.h"
#include "passes/pipeline/train_graph.h"
#include "train/train_step.h"

namespace lj {
namespace {

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op ? 1 : 0;
  return n;
}

TEST(MasterWeights, NamesRoundTrip) {
  EXPECT_EQ(low_weight_input_name("lm_head.weight"), "low:lm_head.weight");
  EXPECT_EQ(low_weight_param_name("low:lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(low_weight_param_name("lm_head.weight"), "");
}

// No parameter is cast in the graph any more: the 16-bit ops read "low:" inputs, and every
// weight-gradient GEMM writes f32 (no cast of a GEMM's output is left).
TEST(MasterWeights, NoWeightCastsLeftAndGemmsWriteF32Gradients) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  for (bool compile : {false, true}) {
    GraphOptions with;
    with.compile = compile;
    with.autocast = DType::bf16;
    GraphOptions without = with;
    without.low_weight_copies = false;
    Graph a, b;
    ASSERT_TRUE(build_train_graph(*model, with, &a).ok());
    ASSERT_TRUE(build_train_graph(*model, without, &b).ok());
    const size_t params = llama_param_specs(*model).size();
    int copies = 0;
    for (ValueId in : a.inputs()) {
      const std::string p = low_weight_param_name(a.input_name(in));
      if (p.empty()) continue;
      ++copies;
      const ValueId master = a.find_input(p);
      ASSERT_NE(master, kNoValue) << p;
      EXPECT_EQ(a.type(in).dtype, DType::bf16);
      EXPECT_EQ(a.type(in).shape, a.type(master).shape);
      EXPECT_EQ(a.input_role(in), Role::state);
    }
    // Every parameter but the embedding table (read by the f32 gather).
    EXPECT_EQ(copies, static_cast<int>(params) - 1);
    EXPECT_EQ(a.inputs().size(), b.inputs().size() + params - 1);
    int f32_gemms = 0;
    for (const Node& n : a.nodes()) {
      if (n.op == Op::cast) {
        const Node& p = a.producer(n.inputs[0]);
        EXPECT_FALSE(p.op == Op::input && a.input_role(n.inputs[0]) == Role::param)
            << "a parameter is still cast: " << a.input_name(n.inputs[0]);
        EXPECT_NE(p.op, Op::matmul) << "a GEMM's output is still cast";
        EXPECT_NE(p.op, Op::rms_norm_backward) << "a norm weight's gradient is still cast";
      }
      if (n.op == Op::matmul && n.attrs.has("dtype")) {
        ++f32_gemms;
        EXPECT_EQ(a.type(n.inputs[0]).dtype, DType::bf16);
        EXPECT_EQ(a.type(n.outputs[0]).dtype, DType::f32);
      }
    }
    // The 7 linear weights of each layer (q, k, v, o, gate, up, down) and, in eager mode, the
    // LM head's (compiled, it is inside linear_cross_entropy).
    EXPECT_EQ(f32_gemms, 7 * model->num_hidden_layers + (compile ? 0 : 1))
        << (compile ? "compiled" : "eager");
    // Compiled, the norms are fused (rms_norm_backward): their dw is written in f32 as well,
    // 2 per layer and the final norm.
    int f32_norm_grads = 0;
    for (const Node& n : a.nodes()) {
      if (n.op == Op::rms_norm_backward && n.attrs.has("dw_dtype")) {
        ++f32_norm_grads;
        EXPECT_EQ(a.type(n.outputs[1]).dtype, DType::f32);
      }
    }
    EXPECT_EQ(f32_norm_grads, compile ? 2 * model->num_hidden_layers + 1 : 0);
    EXPECT_EQ(count_op(b, Op::cast) - count_op(a, Op::cast),
              static_cast<int>(params) - 1 + f32_gemms + f32_norm_grads);
    for (const auto& out : a.outputs()) {
      if (out.name.starts_with("grad:")) {
        EXPECT_EQ(a.type(out.value).dtype, DType::f32);
      }
    }
  }
}

// One forward+backward with and without the pass: the same loss and the same gradients bitwise,
// except the folded weight gradients (GEMMs, fused norms), which are the f32 results whose bf16
// rounding the unfused graph returned: rounding them to bf16 gives its gradients bitwise. After a
// step the copies AdamW wrote are the casts of the new master weights; after a caller changes
// params(), the next forward writes them again.
TEST(MasterWeights, SameStepAsCastsAtThePointOfUse) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Device dev(2);
  const int64_t B = 2, T = 32, V = model->vocab_size;
  Tensor x = testing_util::tokens_of(dev, B, T, 0, V), y = testing_util::tokens_of(dev, B, T, 1, V);
  for (bool compile : {false, true}) {
    SCOPED_TRACE(compile ? "compiled" : "eager");
    TrainStepConfig cfg;
    cfg.graph.compile = compile;
    cfg.graph.autocast = DType::bf16;
    TrainStepConfig off = cfg;
    off.graph.low_weight_copies = false;
    auto a = TrainStep::create(*model, cfg, dev);
    auto b = TrainStep::create(*model, off, dev);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE((*b)->low_params().empty());
    auto ga = (*a)->forward_backward(x, y);
    auto gb = (*b)->forward_backward(x, y);
    ASSERT_TRUE(ga.ok() && gb.ok());
    EXPECT_EQ(ga->loss, gb->loss);
    ASSERT_EQ(ga->grads.size(), gb->grads.size());
    int rounded = 0, exact = 0;
    for (size_t i = 0; i < ga->grads.size(); ++i) {
      const float* pa = ga->grads[i].data<float>();
      const float* pb = gb->grads[i].data<float>();
      const int64_t n = ga->grads[i].numel();
      const bool same = std::memcmp(pa, pb, static_cast<size_t>(n) * 4) == 0;
      if (same) {
        ++exact;
        continue;
      }
      ++rounded;
      for (int64_t k = 0; k < n; ++k) {
        ASSERT_EQ(bf16_to_f32(f32_to_bf16(pa[k])), pb[k]) << (*a)->param_specs()[i].name;
      }
    }
    // The GEMMs' weight gradients, and compiled the fused norms' too (eager's LM head GEMM).
    EXPECT_EQ(rounded,
              7 * model->num_hidden_layers + (compile ? 2 * model->num_hidden_layers + 1 : 1));
    EXPECT_GT(exact, 0);
    // A step: the copies are the casts of the updated masters.
    auto r = (*a)->step(x, y, 1e-3);
    ASSERT_TRUE(r.ok() && r->updated);
    const auto check_copies = [&](TrainStep& s) {
      const std::vector<Tensor>& low = s.low_params();
      const std::vector<Tensor>& p = s.params();
      ASSERT_EQ(low.size(), p.size());
      int defined = 0;
      for (size_t i = 0; i < p.size(); ++i) {
        if (!low[i].defined()) continue;
        ++defined;
        const float* f = p[i].data<float>();
        const auto* h = low[i].data<uint16_t>();
        for (int64_t k = 0; k < p[i].numel(); ++k) ASSERT_EQ(h[k], f32_to_bf16(f[k]));
      }
      EXPECT_EQ(defined, static_cast<int>(p.size()) - 1);
    };
    check_copies(**a);
    // A caller's change (a load): the next forward casts again.
    for (Tensor& t : (*a)->params()) t.data<float>()[0] += 0.25f;
    ASSERT_TRUE((*a)->forward_backward(x, y).ok());
    check_copies(**a);
  }
}

}  // namespace
}  // namespace lj
