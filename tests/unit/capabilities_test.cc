// train/capabilities.h: the table every refusal reads. Walks it: each GPU entry, set on a step
// configuration, passes or is refused by the GPU's check (train/gpu_step_check.cc, host-side: no
// GPU needed) with the table's words; the CPU's entries are run by tests/e2e/capabilities_test.sh.
#include "train/capabilities.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "dist/communicator.h"
#include "train/gpu_train.h"

namespace lj {
namespace {

// A step configuration that asks for (feature, value); false when the GPU's step check does not
// see the feature (the CLI refuses it before a step is configured).
bool step_asking_for(const Capability& c, Communicator* comm, TrainStepConfig* s) {
  *s = TrainStepConfig{};
  if (c.feature == "zero") {
    s->data_parallel.comm = comm;
    s->data_parallel.zero.stage = std::stoi(std::string(c.value));
  } else if (c.feature == "precision") {
    s->graph.autocast = c.value == "bf16"   ? DType::bf16
                        : c.value == "fp16" ? DType::f16
                                            : DType::f32;
    s->graph.loss_scaling = s->loss_scale.enabled = c.value == "fp16";
  } else if (c.feature == "recompute") {
    auto p = parse_recompute_policy(std::string(c.value));
    EXPECT_TRUE(p.ok()) << c.value;
    s->graph.recompute.policy = *p;
  } else if (c.feature == "compile") {
    s->graph.compile = true;
  } else if (c.feature == "profile") {
    s->profile = true;
  } else {
    return false;
  }
  return true;
}

TEST(Capabilities, GpuStepCheckFollowsTheTable) {
  SelfCommunicator self;
  int checked = 0;
  for (const Capability& c : capabilities()) {
    if (c.device != TrainDevice::cuda) continue;
    TrainStepConfig step;
    if (!step_asking_for(c, &self, &step)) continue;
    ++checked;
    const Status s = check_gpu_step_config(step);
    const std::string what = std::string(c.feature) + " " + std::string(c.value);
    if (c.supported) {
      EXPECT_TRUE(s.ok()) << what << ": " << s.message();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::unimplemented) << what;
    EXPECT_NE(s.message().find(std::string(c.why)), std::string::npos)
        << what << ": " << s.message();
    EXPECT_EQ(s.hint(), std::string(c.hint)) << what;
  }
  EXPECT_GE(checked, 12);  // zero 0-3, three precisions, three recomputes, compile, profile
}

// The refusals the CLI makes before a step exists (checkpoint optimization, HF weights in
// benchmark) come from require_capability with the same words.
TEST(Capabilities, RefusalsCarryTheTablesWords) {
  for (const Capability& c : capabilities()) {
    const Status s = require_capability(c.device, c.feature, c.value);
    if (c.supported) {
      EXPECT_TRUE(s.ok()) << c.feature << " " << c.value;
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::unimplemented);
    EXPECT_NE(s.message().find("--device " + std::string(train_device_name(c.device))),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(std::string(c.why)), std::string::npos) << s.message();
    EXPECT_EQ(s.hint(), std::string(c.hint));
  }
  // A value no device takes names the supported ones.
  const Status bad = require_capability(TrainDevice::cpu, "zero", "4");
  EXPECT_EQ(bad.code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.hint().find("0, 1, 2, 3"), std::string::npos) << bad.hint();
}

// Each device states every setting: a feature value listed for one device is listed for the
// other, and an unsupported entry says why and what to do.
TEST(Capabilities, EveryDeviceStatesEverySetting) {
  std::set<std::string> cpu, cuda;
  for (const Capability& c : capabilities()) {
    const std::string key = std::string(c.feature) + "=" + std::string(c.value);
    (c.device == TrainDevice::cpu ? cpu : cuda).insert(key);
    if (!c.supported) {
      EXPECT_FALSE(c.why.empty()) << key;
      EXPECT_FALSE(c.hint.empty()) << key;
    }
  }
  EXPECT_EQ(cpu, cuda);
  EXPECT_EQ(supported_values(TrainDevice::cpu, "zero"), "0, 1, 2, 3");
  EXPECT_EQ(supported_values(TrainDevice::cuda, "precision"), "f32, bf16");
}

}  // namespace
}  // namespace lj
