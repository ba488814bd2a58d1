// Every op of the tiny and small training graphs (eager and compiled, fp32 and bf16) has a CUDA
// kernel, checked on the host (no GPU needed; label cuda_tests, runs in CI), so the CUDA
// executor never meets an op it cannot run in these graphs.
#include <gtest/gtest.h>

#include <set>

#include "backends/cuda/kernels.h"
#include "models/config.h"
#include "passes/pipeline/train_graph.h"

namespace lj {
namespace {

TEST(CudaKernels, EveryOpOfTheTinyAndSmallTrainGraphsHasOne) {
  for (const char* preset : {"tiny", "small"}) {
    for (bool compile : {false, true}) {
      for (DType autocast : {DType::f32, DType::bf16}) {
        auto model = llama_preset(preset);
        ASSERT_TRUE(model.ok());
        GraphOptions o;
        o.compile = compile;
        o.autocast = autocast;
        Graph g;
        ASSERT_TRUE(build_train_graph(*model, o, &g).ok());
        std::set<std::string> missing;
        for (const Node& n : g.nodes()) {
          if (n.op == Op::input || n.op == Op::fused_pointwise || op_def(n.op).has(kAlias))
            continue;
          if (cuda::kernels()[n.op] == nullptr) missing.insert(op_name(n.op));
        }
        std::string list;
        for (const std::string& m : missing) list += " " + m;
        EXPECT_TRUE(missing.empty()) << preset << (compile ? " compiled " : " eager ")
                                     << dtype_name(autocast) << ": no CUDA kernel for" << list;
      }
    }
  }
}

}  // namespace
}  // namespace lj
