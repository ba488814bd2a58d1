// DeepSpeed JSON: batch inference and its errors, "auto" as HF's Trainer resolves it, flags over
// the file, precision, optimizer, DeepSpeed's three LR schedules (values derived by hand), ZeRO
// defaults and refusals, activation checkpointing -> recompute, unknown keys, malformed files, and
// every file in examples/deepspeed/.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/deepspeed_config.h"

namespace lj {
namespace {

RunSettings run_world(int64_t world) {
  RunSettings r;
  r.world_size = world;
  return r;
}

DeepSpeedConfig parse_ok(const std::string& text, const RunSettings& run = RunSettings()) {
  auto c = parse_deepspeed_config(text, "ds.json", run);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : DeepSpeedConfig();
}

Status parse_error(const std::string& text, const RunSettings& run = RunSettings()) {
  auto c = parse_deepspeed_config(text, "ds.json", run);
  EXPECT_FALSE(c.ok()) << text;
  return c.status();
}

bool has_warning(const DeepSpeedConfig& c, const std::string& fragment) {
  for (const std::string& w : c.warnings) {
    if (w.find(fragment) != std::string::npos) return true;
  }
  return false;
}

TEST(DeepSpeedBatch, InfersTheThirdFromEachPair) {
  const RunSettings w2 = run_world(2);
  struct Case {
    const char* json;
    int64_t train, micro, accum;
  };
  const Case cases[] = {
      {R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 32, 4, 4},
      {R"({"train_batch_size": 32, "gradient_accumulation_steps": 4})", 32, 4, 4},
      {R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4})", 32, 4, 4},
      {R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
           "gradient_accumulation_steps": 4})",
       32, 4, 4},
      // One given: DeepSpeed's defaults.
      {R"({"train_batch_size": 32})", 32, 16, 1},
      {R"({"train_micro_batch_size_per_gpu": 4})", 8, 4, 1},
      {R"({"gradient_accumulation_steps": 4})", 8, 1, 4},
      // 5e1 is an integer to DeepSpeed as well.
      {R"({"train_batch_size": 5e1, "train_micro_batch_size_per_gpu": 25})", 50, 25, 1},
  };
  for (const Case& c : cases) {
    DeepSpeedConfig d = parse_ok(c.json, w2);
    EXPECT_EQ(d.train_batch_size, c.train) << c.json;
    EXPECT_EQ(d.micro_batch_per_gpu, c.micro) << c.json;
    EXPECT_EQ(d.gradient_accumulation_steps, c.accum) << c.json;
    EXPECT_EQ(d.world_size, 2);
  }
}

TEST(DeepSpeedBatch, NoKeysOrAutoTakeTheRunsValues) {
  RunSettings r = run_world(4);
  r.micro_batch = 3;
  r.grad_accum = 5;
  for (const char* json :
       {"{}", R"({"train_batch_size": "auto", "gradient_accumulation_steps": "auto",
                                     "train_micro_batch_size_per_gpu": "auto"})"}) {
    DeepSpeedConfig d = parse_ok(json, r);
    EXPECT_EQ(d.micro_batch_per_gpu, 3) << json;
    EXPECT_EQ(d.gradient_accumulation_steps, 5) << json;
    EXPECT_EQ(d.train_batch_size, 60) << json;
  }
}

TEST(DeepSpeedBatch, InconsistentTripleNamesValuesAndFormula) {
  Status s = parse_error(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                             "gradient_accumulation_steps": 2})",
                         run_world(2));
  EXPECT_EQ(s.message(),
            "ds.json: train_batch_size: 32 (file) != train_micro_batch_size_per_gpu 4 (file) x "
            "gradient_accumulation_steps 2 (file) x world_size 2 = 16");
  EXPECT_NE(s.hint().find("train_batch_size = train_micro_batch_size_per_gpu x "
                          "gradient_accumulation_steps x world_size"),
            std::string::npos);
}

TEST(DeepSpeedBatch, InexactDivisionAndNonPositiveAreErrors) {
  Status s =
      parse_error(R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4})", run_world(2));
  EXPECT_EQ(s.message(),
            "ds.json: train_batch_size: 30 is not divisible by train_micro_batch_size_per_gpu 4 x "
            "world_size 2 = 8");
  s = parse_error(R"({"train_batch_size": 7})", run_world(2));
  EXPECT_NE(s.message().find("7 is not divisible by world_size 2"), std::string::npos);
  s = parse_error(R"({"train_micro_batch_size_per_gpu": 0})");
  EXPECT_NE(s.message().find("train_micro_batch_size_per_gpu: must be a positive integer"),
            std::string::npos);
}

TEST(DeepSpeedBatch, FlagsWinOverTheFile) {
  RunSettings r = run_world(1);
  r.micro_batch.set_flag(8);
  DeepSpeedConfig d =
      parse_ok(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})", r);
  EXPECT_EQ(d.micro_batch_per_gpu, 8);
  EXPECT_EQ(d.train_batch_size, 16);
  EXPECT_NE(d.describe().find("train_micro_batch_size_per_gpu = 8  (flag)"), std::string::npos);
  // With all three in the file the flag makes them disagree: which one to give up is the user's
  // call.
  Status s = parse_error(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
                             "gradient_accumulation_steps": 2})",
                         r);
  EXPECT_NE(s.message().find("train_micro_batch_size_per_gpu 8 (flag)"), std::string::npos);
}

TEST(DeepSpeedPrecision, Blocks) {
  EXPECT_EQ(parse_ok("{}").precision, DType::f32);  // no block: fp32, as in DeepSpeed
  EXPECT_EQ(parse_ok(R"({"bf16": {"enabled": true}})").precision, DType::bf16);
  EXPECT_EQ(parse_ok(R"({"bfloat16": {"enabled": true}})").precision, DType::bf16);
  DeepSpeedConfig d = parse_ok(R"({"fp16": {"enabled": true}})");
  EXPECT_EQ(d.precision, DType::f16);
  EXPECT_EQ(d.loss_scale.loss_scale, 0);  // dynamic
  EXPECT_EQ(d.loss_scale.initial_scale_power, 16);
  EXPECT_EQ(d.loss_scale.loss_scale_window, 1000);
  EXPECT_EQ(d.loss_scale.hysteresis, 2);
  EXPECT_EQ(d.loss_scale.min_loss_scale, 1);
  EXPECT_FALSE(d.loss_scale.consecutive_hysteresis);
  d = parse_ok(R"({"fp16": {"enabled": true, "loss_scale": 128, "initial_scale_power": 12,
                   "loss_scale_window": 500, "hysteresis": 4, "min_loss_scale": 0.5,
                   "consecutive_hysteresis": true}})");
  EXPECT_TRUE(d.loss_scale.consecutive_hysteresis);
  EXPECT_EQ(d.loss_scale.loss_scale, 128);
  EXPECT_EQ(d.loss_scale.initial_scale_power, 12);
  EXPECT_EQ(d.loss_scale.loss_scale_window, 500);
  EXPECT_EQ(d.loss_scale.hysteresis, 4);
  EXPECT_EQ(d.loss_scale.min_loss_scale, 0.5);
  Status s = parse_error(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})");
  EXPECT_NE(s.message().find("fp16 and bf16 are both enabled"), std::string::npos);
}

TEST(DeepSpeedPrecision, AutoAndFlag) {
  const char* both_auto = R"({"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}})";
  RunSettings r;
  r.precision = DType::bf16;
  EXPECT_EQ(parse_ok(both_auto, r).precision, DType::bf16);
  r.precision = DType::f16;
  EXPECT_EQ(parse_ok(both_auto, r).precision, DType::f16);
  r.precision = DType::f32;
  EXPECT_EQ(parse_ok(both_auto, r).precision, DType::f32);
  r.precision.set_flag(DType::f32);
  EXPECT_EQ(parse_ok(R"({"bf16": {"enabled": true}})", r).precision, DType::f32);
}

TEST(DeepSpeedClipping, DefaultAutoFileFlag) {
  RunSettings r;
  r.grad_clip = 0.7;
  EXPECT_EQ(parse_ok("{}", r).gradient_clipping, 0);  // DeepSpeed's default: off
  EXPECT_EQ(parse_ok(R"({"gradient_clipping": "auto"})", r).gradient_clipping, 0.7);
  EXPECT_EQ(parse_ok(R"({"gradient_clipping": 2.5})", r).gradient_clipping, 2.5);
  r.grad_clip.set_flag(1.0);
  DeepSpeedConfig d = parse_ok(R"({"gradient_clipping": 2.5})", r);
  EXPECT_EQ(d.gradient_clipping, 1.0);
  EXPECT_NE(d.describe().find("gradient_clipping = 1  (flag; file said 2.5)"), std::string::npos);
}

TEST(DeepSpeedOptimizer, AutoExplicitDefaultsAndNoBlock) {
  RunSettings r;
  r.lr = 2e-4;
  r.beta1 = 0.8;
  r.beta2 = 0.9;
  r.eps = 1e-6;
  r.weight_decay = 0.05;
  DeepSpeedConfig d = parse_ok(R"({"optimizer": {"type": "AdamW", "params": {"lr": "auto",
      "betas": "auto", "eps": "auto", "weight_decay": "auto"}}})",
                               r);
  EXPECT_EQ(d.optimizer.lr, 2e-4);
  EXPECT_EQ(d.optimizer.beta1, 0.8);
  EXPECT_EQ(d.optimizer.beta2, 0.9);
  EXPECT_EQ(d.optimizer.eps, 1e-6);
  EXPECT_EQ(d.optimizer.weight_decay, 0.05);
  d = parse_ok(R"({"optimizer": {"type": "adamw", "params": {"lr": 1e-4, "betas": [0.9, 0.95],
      "eps": 1e-7, "weight_decay": 0.1}}})",
               r);
  EXPECT_EQ(d.optimizer.lr, 1e-4);
  EXPECT_EQ(d.optimizer.beta2, 0.95);
  EXPECT_EQ(d.optimizer.eps, 1e-7);
  EXPECT_EQ(d.optimizer.weight_decay, 0.1);
  // Missing params: FusedAdam's defaults. Adam with adam_w_mode (default true) is AdamW.
  d = parse_ok(R"({"optimizer": {"type": "Adam", "params": {"weight_decay": 0.01}}})", r);
  EXPECT_EQ(d.optimizer.lr, 1e-3);
  EXPECT_EQ(d.optimizer.beta1, 0.9);
  EXPECT_EQ(d.optimizer.beta2, 0.999);
  EXPECT_EQ(d.optimizer.eps, 1e-8);
  // No block: HF builds AdamW from the run's settings.
  d = parse_ok("{}", r);
  EXPECT_EQ(d.optimizer.lr, 2e-4);
  EXPECT_EQ(d.optimizer.weight_decay, 0.05);
  r.lr.set_flag(5e-5);
  EXPECT_EQ(parse_ok(R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})", r).optimizer.lr,
            5e-5);
}

TEST(DeepSpeedOptimizer, Refusals) {
  Status s = parse_error(R"({"optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}})");
  EXPECT_EQ(s.message(), "ds.json: optimizer.type \"Lamb\" is not supported yet");
  EXPECT_FALSE(s.hint().empty());
  s = parse_error(
      R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false, "weight_decay": 0.1}}})");
  EXPECT_NE(s.message().find("adam_w_mode false"), std::string::npos);
  EXPECT_NE(s.message().find("is not supported yet"), std::string::npos);
  parse_ok(R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})");  // no decay
  s = parse_error(R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})");
  EXPECT_NE(s.message().find("optimizer.params.betas: expected two numbers"), std::string::npos);
  s = parse_error(R"({"optimizer": {"type": "AdamW", "params": {"amsgrad": true}}})");
  EXPECT_EQ(s.message(), "ds.json: optimizer.params.amsgrad is not supported yet");
}

// Learning rates in these tests are about 1e-3. Observed differences from the hand-derived
// values: 0 for the linear and cosine cases, 1.1e-18 for ln 2 / ln 10 (the literal has 14
// digits); 1e-15 is far above double rounding and far below any formula mistake (>= 1e-6).
constexpr double kLrTol = 1e-15;

TEST(DeepSpeedScheduler, WarmupLRLogAndLinear) {
  DeepSpeedConfig d = parse_ok(R"({"scheduler": {"type": "WarmupLR", "params": {
      "warmup_min_lr": 0, "warmup_max_lr": 0.001, "warmup_num_steps": 10}}})");
  const DsScheduler& s = d.scheduler;
  ASSERT_EQ(s.type, DsScheduler::Type::warmup_lr);
  EXPECT_EQ(s.warmup_type, DsScheduler::Warmup::log);   // DeepSpeed's default
  EXPECT_NEAR(s.lr_at(-1), 0.0, kLrTol);                // set at construction: warmup_min_lr
  EXPECT_NEAR(s.lr_at(0), 0.0, kLrTol);                 // log(1) / log(10) = 0
  EXPECT_NEAR(s.lr_at(1), 3.0102999566398e-4, kLrTol);  // 1e-3 * ln 2 / ln 10
  EXPECT_NEAR(s.lr_at(9), 1e-3, kLrTol);                // ln 10 / ln 10 = 1
  EXPECT_NEAR(s.lr_at(10), 1e-3, kLrTol);               // constant after warmup
  EXPECT_NEAR(s.lr_at(100000), 1e-3, kLrTol);
  EXPECT_NEAR(s.lr_for_step(0), s.lr_at(-1), 0);  // the scheduler steps after the optimizer
  EXPECT_NEAR(s.lr_for_step(2), s.lr_at(1), 0);

  d = parse_ok(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-4,
      "warmup_max_lr": 1e-3, "warmup_num_steps": 10, "warmup_type": "linear"}}})");
  EXPECT_NEAR(d.scheduler.lr_at(0), 1e-4, kLrTol);    // 1e-4 + 9e-4 * 0 / 10
  EXPECT_NEAR(d.scheduler.lr_at(5), 5.5e-4, kLrTol);  // 1e-4 + 9e-4 * 5 / 10
  EXPECT_NEAR(d.scheduler.lr_at(10), 1e-3, kLrTol);
}

TEST(DeepSpeedScheduler, WarmupDecayLR) {
  DeepSpeedConfig d = parse_ok(R"({"scheduler": {"type": "WarmupDecayLR", "params": {
      "warmup_min_lr": 0, "warmup_max_lr": 0.001, "warmup_num_steps": 10,
      "total_num_steps": 110, "warmup_type": "linear"}}})");
  const DsScheduler& s = d.scheduler;
  EXPECT_NEAR(s.lr_at(5), 5e-4, kLrTol);    // 1e-3 * 5 / 10
  EXPECT_NEAR(s.lr_at(10), 1e-3, kLrTol);   // (110 - 10) / (110 - 10) = 1
  EXPECT_NEAR(s.lr_at(60), 5e-4, kLrTol);   // (110 - 60) / 100 = 0.5
  EXPECT_NEAR(s.lr_at(100), 1e-4, kLrTol);  // 10 / 100
  EXPECT_NEAR(s.lr_at(110), 0.0, kLrTol);
  EXPECT_NEAR(s.lr_at(500), 0.0, kLrTol);  // max(0, ...)
}

TEST(DeepSpeedScheduler, WarmupCosineLR) {
  DeepSpeedConfig d = parse_ok(R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 110,
      "warmup_num_steps": 10, "warmup_min_ratio": 0.1, "cos_min_ratio": 0.01,
      "warmup_type": "linear"}}})");
  const DsScheduler& s = d.scheduler;
  EXPECT_EQ(s.warmup_max_lr, 1e-3);         // the optimizer's lr
  EXPECT_NEAR(s.lr_at(-1), 0.0, kLrTol);    // DeepSpeed's get_lr() before the first step
  EXPECT_NEAR(s.lr_at(0), 1e-4, kLrTol);    // 1e-3 * (0.1 + 0.9 * 0)
  EXPECT_NEAR(s.lr_at(5), 5.5e-4, kLrTol);  // 1e-3 * (0.1 + 0.9 * 0.5)
  EXPECT_NEAR(s.lr_at(9), 9.1e-4, kLrTol);  // 1e-3 * (0.1 + 0.9 * 0.9)
  // it 59: (59 - 10 + 1) / 100 = 0.5 of the way, cos(pi / 2) = 0 -> 0.01 + 0.99 * 0.5 = 0.505.
  EXPECT_NEAR(s.lr_at(59), 5.05e-4, kLrTol);
  // it 109: cos(pi) = -1 -> ratio 0.01.
  EXPECT_NEAR(s.lr_at(109), 1e-5, kLrTol);
  // DeepSpeed does not clamp past total_num_steps: at it 209 the phase is 2 pi and lr is back to
  // 1e-3.
  EXPECT_NEAR(s.lr_at(209), 1e-3, kLrTol);
}

TEST(DeepSpeedScheduler, AutoFlagsAndDeepSpeedQuirks) {
  RunSettings r;
  r.lr = 4e-4;
  r.warmup_steps = 20;
  r.total_steps = 500;
  DeepSpeedConfig d = parse_ok(R"({"scheduler": {"type": "WarmupDecayLR", "params": {
      "warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto",
      "total_num_steps": "auto"}}})",
                               r);
  EXPECT_EQ(d.scheduler.warmup_min_lr, 0);  // HF fills 0
  EXPECT_EQ(d.scheduler.warmup_max_lr, 4e-4);
  EXPECT_EQ(d.scheduler.warmup_num_steps, 20);
  EXPECT_EQ(d.scheduler.total_num_steps, 500);
  r.total_steps.set_flag(800);
  r.lr.set_flag(1e-4);
  d = parse_ok(R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_max_lr": 3e-3,
      "total_num_steps": 100}}})",
               r);
  EXPECT_EQ(d.scheduler.total_num_steps, 800);
  EXPECT_EQ(d.scheduler.warmup_max_lr, 1e-4);
  // warmup_num_steps below 2 is raised to 2 (DeepSpeed: max(2, n)); log warmup then reaches max
  // at iteration 1: log(2) / log(2) = 1.
  d = parse_ok(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 1e-3,
      "warmup_num_steps": 0}}})");
  EXPECT_EQ(d.scheduler.warmup_num_steps, 2);
  EXPECT_NEAR(d.scheduler.lr_at(1), 1e-3, kLrTol);
  // A param the type does not read, and an unknown warmup_type, are warnings (DeepSpeed's log).
  d = parse_ok(R"({"scheduler": {"type": "WarmupLR", "params": {"cos_min_ratio": 0.1,
      "warmup_type": "cubic"}}})");
  EXPECT_TRUE(has_warning(d, "scheduler.params.cos_min_ratio has no effect on WarmupLR"));
  EXPECT_TRUE(has_warning(d, "warmup_type \"cubic\" is unknown"));
  EXPECT_EQ(d.scheduler.warmup_type, DsScheduler::Warmup::log);
  // No scheduler block: the trainer keeps its own.
  EXPECT_EQ(parse_ok("{}").scheduler.type, DsScheduler::Type::none);
}

TEST(DeepSpeedScheduler, Errors) {
  Status s = parse_error(R"({"scheduler": {"type": "WarmupDecayLR", "params": {}}})");
  EXPECT_NE(s.message().find("total_num_steps: missing (WarmupDecayLR needs it)"),
            std::string::npos);
  s = parse_error(
      R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": "auto"}}})");
  EXPECT_NE(s.message().find("the run's step count is unknown"), std::string::npos);
  s = parse_error(R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 5,
      "warmup_num_steps": 5}}})");
  EXPECT_NE(s.message().find("5 must exceed warmup_num_steps 5"), std::string::npos);
  s = parse_error(R"({"scheduler": {"type": "OneCycle", "params": {}}})");
  EXPECT_EQ(s.message(), "ds.json: scheduler.type \"OneCycle\" is not supported yet");
  s = parse_error(R"({"scheduler": {"type": "WarmupLR", "params": {"cos_min_ratio": "auto"}}})");
  EXPECT_NE(s.message().find("scheduler.params.cos_min_ratio: \"auto\" is not resolved"),
            std::string::npos);
}

TEST(DeepSpeedZero, DefaultsAndStage3Overlap) {
  DeepSpeedConfig d = parse_ok("{}");
  EXPECT_EQ(d.zero.stage, 0);
  EXPECT_EQ(d.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(d.zero.allgather_bucket_size, 500000000);
  EXPECT_EQ(d.zero.stage3_prefetch_bucket_size, 50000000);
  EXPECT_EQ(d.zero.stage3_param_persistence_threshold, 100000);
  EXPECT_FALSE(d.zero.overlap_comm);
  EXPECT_TRUE(d.zero.contiguous_gradients);
  EXPECT_TRUE(parse_ok(R"({"zero_optimization": {"stage": 3}})").zero.overlap_comm);
  EXPECT_FALSE(parse_ok(R"({"zero_optimization": {"stage": 2}})").zero.overlap_comm);
  EXPECT_FALSE(
      parse_ok(R"({"zero_optimization": {"stage": 3, "overlap_comm": false}})").zero.overlap_comm);
  d = parse_ok(R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": 2e8,
      "allgather_bucket_size": 300000000, "offload_optimizer": {"device": "none"}}})");
  EXPECT_EQ(d.zero.reduce_bucket_size, 200000000);
  EXPECT_EQ(d.zero.allgather_bucket_size, 300000000);
}

TEST(DeepSpeedZero, ZeroFlagWinsOverTheFileAndSetsTheWorldsBatch) {
  RunSettings r = run_world(2);
  r.zero_stage.set_flag(1);
  r.micro_batch.set_flag(4);
  DeepSpeedConfig d = parse_ok(R"({"zero_optimization": {"stage": 2}})", r);
  EXPECT_EQ(d.zero.stage, 1);
  EXPECT_NE(d.describe().find("zero_optimization.stage = 1  (flag; file said 2)"),
            std::string::npos)
      << d.describe();
  EXPECT_EQ(d.train_batch_size, 8);  // micro 4 x accum 1 x world 2
  // Without the flag the file's stage, and with neither DeepSpeed's default.
  EXPECT_EQ(parse_ok(R"({"zero_optimization": {"stage": 2}})", run_world(2)).zero.stage, 2);
  EXPECT_EQ(parse_ok("{}", run_world(2)).zero.stage, 0);
}

TEST(DeepSpeedZero, AutoBucketsFromHiddenSize) {
  RunSettings r;
  r.hidden_size = 4096;
  DeepSpeedConfig d = parse_ok(R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}})",
                               r);
  EXPECT_EQ(d.zero.reduce_bucket_size, 16777216);               // 4096^2
  EXPECT_EQ(d.zero.stage3_prefetch_bucket_size, 15099494);      // int(0.9 * 16777216 = 15099494.4)
  EXPECT_EQ(d.zero.stage3_param_persistence_threshold, 40960);  // 10 * 4096
  EXPECT_NE(d.describe().find("reduce_bucket_size = 16777216  (auto: hidden_size^2)"),
            std::string::npos);
  Status s = parse_error(R"({"zero_optimization": {"reduce_bucket_size": "auto"}})");
  EXPECT_NE(s.message().find("need the model's hidden size"), std::string::npos);
}

TEST(DeepSpeedZero, WrongTypesAndRefusals) {
  Status s = parse_error(R"({"zero_optimization": {"stage": "three"}})");
  EXPECT_EQ(s.message(), "ds.json: zero_optimization.stage: expected an integer, got \"three\"");
  s = parse_error(R"({"zero_optimization": {"stage": 4}})");
  EXPECT_NE(s.message().find("must be 0, 1, 2 or 3, got 4"), std::string::npos);
  s = parse_error(R"({"zero_optimization": {"stage": 2.5}})");
  EXPECT_NE(s.message().find("expected an integer, got 2.5"), std::string::npos);
  s = parse_error(R"({"zero_optimization": {"overlap_comm": "yes"}})");
  EXPECT_NE(s.message().find("overlap_comm: expected true or false"), std::string::npos);
  s = parse_error(R"({"zero_optimization": {"stage": "auto"}})");
  EXPECT_NE(s.message().find("zero_optimization.stage: \"auto\" is not resolved"),
            std::string::npos);
  s = parse_error(R"({"zero_optimization": {"reduce_bucket_size": -1}})");
  EXPECT_NE(s.message().find("reduce_bucket_size: must be >= 0"), std::string::npos);
  s = parse_error(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})");
  EXPECT_EQ(s.message(),
            "ds.json: zero_optimization.offload_optimizer.device \"cpu\" is not supported yet");
  s = parse_error(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})");
  EXPECT_NE(s.message().find("offload_param.device \"nvme\" is not supported yet"),
            std::string::npos);
  s = parse_error(R"({"zero_optimization": {"zero_quantized_weights": true}})");
  EXPECT_EQ(s.message(), "ds.json: zero_optimization.zero_quantized_weights is not supported yet");
  parse_ok(
      R"({"zero_optimization": {"zero_quantized_weights": false, "zero_hpz_partition_size": 1}})");
}

bool has_line(const DeepSpeedConfig& c, const std::string& key, const std::string& value,
              const std::string& origin) {
  for (const DeepSpeedConfig::Line& l : c.resolved) {
    if (l.key == key) return l.value == value && l.origin == origin;
  }
  return false;
}

bool no_effect(const DeepSpeedConfig& c, const std::string& key) {
  return std::find(c.no_effect_keys.begin(), c.no_effect_keys.end(), key) != c.no_effect_keys.end();
}

// The block asks for HF's gradient checkpointing: full recompute, one region per layer.
TEST(DeepSpeedRecompute, ActivationCheckpointingMeansFullPerLayer) {
  DeepSpeedConfig d = parse_ok("{}");
  EXPECT_EQ(d.recompute, "none");
  EXPECT_TRUE(has_line(d, "recompute", "none", "default"));
  EXPECT_EQ(parse_ok(R"({"activation_checkpointing": null})").recompute, "none");
  for (const char* text : {R"({"activation_checkpointing": {}})",
                           R"({"activation_checkpointing": {"partition_activations": false,
                                "cpu_checkpointing": false, "profile": true}})"}) {
    d = parse_ok(text);
    EXPECT_EQ(d.recompute, "full") << text;
    EXPECT_EQ(d.recompute_method, "uniform") << text;
    EXPECT_EQ(d.recompute_layers, 1) << text;
    EXPECT_TRUE(has_line(d, "recompute", "full", "activation_checkpointing")) << d.describe();
    EXPECT_TRUE(has_line(d, "recompute_layers", "1", "activation_checkpointing")) << d.describe();
  }
  // number_checkpoints sizes DeepSpeed's contiguous buffer; it does not choose layers.
  d = parse_ok(R"({"activation_checkpointing": {"partition_activations": true,
      "contiguous_memory_optimization": true, "number_checkpoints": 12,
      "synchronize_checkpoint_boundary": true, "profile": false}})");
  EXPECT_EQ(d.recompute, "full");
  EXPECT_EQ(d.recompute_layers, 1);
  for (const char* k : {"partition_activations", "contiguous_memory_optimization",
                        "number_checkpoints", "synchronize_checkpoint_boundary", "profile"}) {
    EXPECT_TRUE(no_effect(d, std::string("activation_checkpointing.") + k)) << k;
  }
  EXPECT_NE(d.describe().find("activation_checkpointing.number_checkpoints"), std::string::npos);
  Status s = parse_error(R"({"activation_checkpointing": {"cpu_checkpointing": true}})");
  EXPECT_EQ(s.message(),
            "ds.json: activation_checkpointing.cpu_checkpointing is not supported yet");
  EXPECT_NE(s.hint().find("set it to false"), std::string::npos);
}

TEST(DeepSpeedRecompute, FlagsWinKeyByKey) {
  const std::string block = R"({"activation_checkpointing": {"partition_activations": true}})";
  RunSettings r;
  r.recompute.set_flag("selective");
  DeepSpeedConfig d = parse_ok(block, r);
  EXPECT_EQ(d.recompute, "selective");
  EXPECT_EQ(d.recompute_method, "uniform");  // the block's, no flag
  EXPECT_EQ(d.recompute_layers, 1);
  EXPECT_TRUE(has_line(d, "recompute", "selective", "flag; activation_checkpointing means full"))
      << d.describe();
  EXPECT_TRUE(has_line(d, "recompute_method", "uniform", "activation_checkpointing"));

  // --recompute-method block alone: every layer stays recomputed (-1: all layers).
  r = RunSettings();
  r.recompute_method.set_flag("block");
  d = parse_ok(block, r);
  EXPECT_EQ(d.recompute, "full");
  EXPECT_EQ(d.recompute_method, "block");
  EXPECT_EQ(d.recompute_layers, -1);
  r.recompute_layers.set_flag(3);
  d = parse_ok(block, r);
  EXPECT_EQ(d.recompute_layers, 3);
  EXPECT_TRUE(has_line(d, "recompute_layers", "3", "flag; activation_checkpointing means -1"))
      << d.describe();

  // --recompute none switches the block off; without a block the flags are taken as they are.
  r = RunSettings();
  r.recompute.set_flag("none");
  EXPECT_EQ(parse_ok(block, r).recompute, "none");
  r = RunSettings();
  r.recompute.set_flag("full");
  r.recompute_layers.set_flag(2);
  d = parse_ok("{}", r);
  EXPECT_EQ(d.recompute, "full");
  EXPECT_EQ(d.recompute_layers, 2);
  EXPECT_TRUE(has_line(d, "recompute", "full", "flag"));
  EXPECT_TRUE(has_line(d, "recompute_method", "uniform", "default"));
}

TEST(DeepSpeedKeys, UnknownNoEffectAndRefused) {
  DeepSpeedConfig d = parse_ok(R"({"train_batch_size": 8, "frobnicate": 1, "steps_per_print": 10,
      "wall_clock_breakdown": false, "prescale_gradients": false,
      "zero_optimization": {"stage": 1, "bucket_magic": true},
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "foo": 2}},
      "flops_profiler": {"enabled": false}, "pipeline": {"enabled": false}})");
  EXPECT_EQ(d.warnings.size(), 3u);
  EXPECT_TRUE(has_warning(d, "ds.json: unknown key 'frobnicate' ignored"));
  EXPECT_TRUE(has_warning(d, "unknown key 'zero_optimization.bucket_magic'"));
  EXPECT_TRUE(has_warning(d, "unknown key 'optimizer.params.foo'"));
  const std::string text = d.describe();
  const size_t listed = text.find("accepted without effect:");  // in the JSON library's key order
  ASSERT_NE(listed, std::string::npos) << text;
  for (const char* key : {"steps_per_print", "wall_clock_breakdown", "prescale_gradients",
                          "flops_profiler", "pipeline"}) {
    EXPECT_NE(text.find(key, listed), std::string::npos) << key;
  }
  for (const char* json :
       {R"({"pipeline": {"stages": 2}})", R"({"sparse_attention": {"mode": "fixed"}})",
        R"({"amp": {"enabled": true}})", R"({"sparse_gradients": true})"}) {
    Status s = parse_error(json);
    EXPECT_EQ(s.code(), StatusCode::unimplemented) << json;
    EXPECT_NE(s.message().find("is not supported yet"), std::string::npos) << s.message();
    EXPECT_FALSE(s.hint().empty()) << json;
  }
}

TEST(DeepSpeedKeys, MalformedFilesGiveOneLineNamingTheFile) {
  const char* bad[] = {
      R"({"train_batch_size": 8,})",                 // trailing comma
      R"({"train_batch_size": 8 // c
      })",                                           // comment
      "[1, 2]",                                      // not an object
      "",                                            // empty
      R"({"zero_optimization": 3})",                 // block of the wrong type
      R"({"gradient_clipping": true})",              // wrong type
      R"({"optimizer": {"params": {"lr": 1e-3}}})",  // no type
  };
  for (const char* json : bad) {
    Status s = parse_error(json);
    EXPECT_EQ(s.message().rfind("ds.json: ", 0), 0u) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_FALSE(s.hint().empty()) << s.message();
  }
  Status s = parse_error(R"({"train_batch_size": 8,})");
  EXPECT_NE(s.message().find("not valid JSON: parse error at line 1"), std::string::npos)
      << s.message();
  auto missing = load_deepspeed_config("/nonexistent/ds.json", RunSettings());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
}

// Every sample in examples/deepspeed/ parses without warnings; zero3_bf16.json is the recipe.
TEST(DeepSpeedExamples, EveryFileParses) {
  const std::string here = __FILE__;
  const std::string root =
      here.substr(0, here.size() - std::string("tests/unit/deepspeed_config_test.cc").size());
  const std::filesystem::path dir = std::filesystem::path(root) / "examples" / "deepspeed";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  RunSettings r = run_world(8);
  r.hidden_size = 4096;
  r.total_steps = 1000;
  r.warmup_steps = 10;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    auto c = load_deepspeed_config(entry.path().string(), r);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->warnings.empty()) << entry.path() << ": " << c->warnings.front();
    EXPECT_NE(c->describe().find("train_batch_size = "), std::string::npos);
  }
  EXPECT_GE(files, 3);

  std::ifstream f(dir / "zero3_bf16.json");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), deepspeed_zero3_bf16_recipe());
  auto c = parse_deepspeed_config(std::string(deepspeed_zero3_bf16_recipe()), "recipe", r);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->zero.stage, 3);
  EXPECT_EQ(c->precision, DType::bf16);
  EXPECT_EQ(c->zero.stage3_prefetch_bucket_size, 15099494);
  EXPECT_EQ(c->scheduler.type, DsScheduler::Type::warmup_lr);
  EXPECT_EQ(c->train_batch_size, 8);     // micro 1 x accum 1 x world 8, all "auto"
  EXPECT_EQ(c->gradient_clipping, 1.0);  // "auto": the run's default
}

}  // namespace
}  // namespace lj
