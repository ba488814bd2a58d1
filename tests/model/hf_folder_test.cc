// HF model folders: save and load round trip (single file and sharded), and refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/tokens.h"
#include "models/hf_config.h"
#include "train/eval.h"
#include "train/train_step.h"

namespace lj {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  return testing::TempDir() + name + "_" + std::to_string(::getpid());
}

TEST(HfFolder, RoundTripSingleAndSharded) {
  Device dev(1);
  auto c = llama_preset("tiny");
  ASSERT_TRUE(c.ok());
  const auto specs = llama_param_specs(*c);
  const auto params = init_llama_params(dev, specs, 0.02, 7);
  for (int64_t shard : {int64_t{5'000'000'000}, int64_t{100'000}}) {
    const std::string dir = temp_dir("hf_rt_" + std::to_string(shard));
    fs::remove_all(dir);
    ASSERT_TRUE(save_hf_model(dir, *c, specs, params, {.max_shard_bytes = shard}).ok());
    EXPECT_EQ(fs::exists(dir + "/model.safetensors.index.json"), shard < 1'000'000);
    auto m = load_hf_model(dir, dev);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(m->params.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_EQ(std::memcmp(m->params[i].raw(), params[i].raw(), params[i].bytes()), 0)
          << specs[i].name;
    }
    // An existing folder is never overwritten.
    Status again = save_hf_model(dir, *c, specs, params, {.max_shard_bytes = shard});
    EXPECT_FALSE(again.ok());
    EXPECT_NE(again.message().find("already exists"), std::string::npos);
    fs::remove_all(dir);
  }
}

// A folder of bf16 (or f16) weights, as HF publishes Llama 3: config.json names the dtype, the
// files hold 16-bit tensors, and loading gives f32 master weights equal to the 16-bit values.
TEST(HfFolder, SixteenBitWeightsLoadIntoF32MasterWeights) {
  Device dev(1);
  auto c = llama_preset("tiny");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->torch_dtype, DType::f32);
  const auto specs = llama_param_specs(*c);
  const auto params = init_llama_params(dev, specs, 0.02, 7);
  for (DType dtype : {DType::bf16, DType::f16}) {
    const std::string dir = temp_dir(std::string("hf_") + dtype_name(dtype));
    fs::remove_all(dir);
    ASSERT_TRUE(save_hf_model(dir, *c, specs, params, {.dtype = dtype}).ok());
    // Half the bytes of f32 on disk.
    const auto header = 8 + 100'000;  // an upper bound on the JSON header of 20 tensors
    EXPECT_LT(fs::file_size(dir + "/model.safetensors"), c->num_params() * 2 + header);
    auto m = load_hf_model(dir, dev);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->config.torch_dtype, dtype);
    int64_t changed = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_EQ(m->params[i].dtype(), DType::f32);
      const float* want = params[i].data<float>();
      const float* got = m->params[i].data<float>();
      for (int64_t k = 0; k < params[i].numel(); ++k) {
        const float rounded = dtype == DType::bf16 ? bf16_to_f32(f32_to_bf16(want[k]))
                                                   : f16_to_f32(f32_to_f16(want[k]));
        ASSERT_EQ(got[k], rounded) << specs[i].name << "[" << k << "]";
        changed += got[k] != want[k];
      }
    }
    EXPECT_GT(changed, 0);  // the rounding happened: the file is not f32 in disguise
    // Saved again in the dtype it came in, it is the same file: the values are exact in it.
    const std::string again = dir + "_again";
    fs::remove_all(again);
    ASSERT_TRUE(save_hf_model(again, m->config, specs, m->params, {.dtype = dtype}).ok());
    std::ifstream a(dir + "/model.safetensors", std::ios::binary),
        b(again + "/model.safetensors", std::ios::binary);
    EXPECT_TRUE(
        std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b)));
    fs::remove_all(dir);
    fs::remove_all(again);
  }
}

TEST(HfFolder, Float16OverflowWritesNothing) {
  Device dev(1);
  auto c = llama_preset("tiny");
  const auto specs = llama_param_specs(*c);
  auto params = init_llama_params(dev, specs, 0.02, 7);
  params[3].data<float>()[5] = 1e5f;  // beyond f16's 65504
  const std::string dir = temp_dir("hf_f16_overflow");
  fs::remove_all(dir);
  Status s = save_hf_model(dir, *c, specs, params, {.dtype = DType::f16});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("beyond float16's range"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find(specs[3].name), std::string::npos) << s.to_string();
  EXPECT_NE(s.hint().find("--dtype bf16"), std::string::npos) << s.to_string();
  EXPECT_FALSE(fs::exists(dir));
  // bf16 holds it (8 exponent bits, f32's range).
  ASSERT_TRUE(save_hf_model(dir, *c, specs, params, {.dtype = DType::bf16}).ok());
  fs::remove_all(dir);
}

TEST(HfConfig, TorchDtypeRoundTripsAndBadValuesAreRefused) {
  auto c = llama_preset("llama3-8b");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->torch_dtype, DType::bf16);  // Meta's published config
  const std::string text = hf_config_json(*c);
  EXPECT_NE(text.find("\"torch_dtype\": \"bfloat16\""), std::string::npos) << text;
  auto back = parse_hf_config(text, "x");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->torch_dtype, DType::bf16);
  // transformers v5 spells it dtype.
  std::string v5 = text;
  const std::string v4_key = "\"torch_dtype\": \"bfloat16\"";
  v5.replace(v5.find(v4_key), v4_key.size(), "\"dtype\": \"float16\"");
  back = parse_hf_config(v5, "x");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << v5;
  EXPECT_EQ(back->torch_dtype, DType::f16);
  std::string bad = text;
  bad.replace(bad.find("bfloat16"), 8, "int8");
  back = parse_hf_config(bad, "cfg.json");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().message(), "cfg.json: 'torch_dtype' is 'int8'");
  EXPECT_NE(back.status().hint().find("bfloat16"), std::string::npos);
}

TEST(HfFolder, LoadRefusesMismatchedWeights) {
  Device dev(1);
  auto tiny = llama_preset("tiny");
  const auto specs = llama_param_specs(*tiny);
  const auto params = init_llama_params(dev, specs, 0.02, 7);
  const std::string dir = temp_dir("hf_bad");
  fs::remove_all(dir);
  ASSERT_TRUE(save_hf_model(dir, *tiny, specs, params).ok());
  // A config with a wider MLP than the weights hold.
  LlamaConfig wider = *tiny;
  wider.intermediate_size = 160;
  {
    std::ofstream f(dir + "/config.json");
    f << hf_config_json(wider);
  }
  auto m = load_hf_model(dir, dev);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("gate_proj.weight' is (128, 64), the config needs (160, 64)"),
            std::string::npos)
      << m.status().to_string();
  fs::remove(dir + "/model.safetensors");
  m = load_hf_model(dir, dev);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("holds no model.safetensors"), std::string::npos);
  fs::remove_all(dir);
  EXPECT_EQ(load_hf_model(dir, dev).status().code(), StatusCode::not_found);
}

// eval --precision bf16: the same windows scored with the autocast forward. A model with
// structure (trained-like weights: std 0.2) so the bf16 rounding shows in the loss.
TEST(Eval, Bf16MixedPrecisionScoresCloseToF32) {
  Device dev(2);
  auto c = llama_preset("tiny");
  HfModel m;
  m.config = *c;
  m.specs = llama_param_specs(*c);
  m.params = init_llama_params(dev, m.specs, 0.2, 3);
  const std::string path = temp_dir("tokens_bf16") + ".u32";
  {
    std::vector<uint32_t> toks(4000);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint32_t>((i * i + 3 * i) % 256);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(toks.data()),
            static_cast<std::streamsize>(toks.size() * 4));
  }
  auto data = TokenFile::open(path, TokenFormat::raw_u32);
  ASSERT_TRUE(data.ok());
  EvalOptions o;
  o.batch_size = 2;
  o.seq_len = 64;
  o.max_batches = 8;
  Tensor logits32, logits16;
  o.first_logits = &logits32;
  auto f32 = evaluate(m, *data, o, dev);
  o.autocast = DType::bf16;
  o.first_logits = &logits16;
  auto bf16 = evaluate(m, *data, o, dev);
  ASSERT_TRUE(f32.ok() && bf16.ok()) << f32.status().to_string() << bf16.status().to_string();
  ASSERT_EQ(logits16.dtype(), DType::f32);  // handed back in f32
  // Norm-wise relative error of a run's first-batch logits against the f32 run's.
  auto logits_rel = [&](const Tensor& got) {
    double diff2 = 0, ref2 = 0;
    for (int64_t i = 0; i < logits32.numel(); ++i) {
      const double r = logits32.data<float>()[i];
      const double d = got.data<float>()[i] - r;
      diff2 += d * d;
      ref2 += r * r;
    }
    return std::sqrt(diff2 / ref2);
  };
  // The model's sensitivity to bf16 rounding, measured without any bf16 kernel: the f32 forward
  // of the weights rounded once to bf16 (relative error <= 2^-9 each).
  HfModel rounded = m;
  rounded.params = init_llama_params(dev, m.specs, 0.2, 3);
  for (Tensor& p : rounded.params) {
    for (int64_t k = 0; k < p.numel(); ++k)
      p.data<float>()[k] = bf16_to_f32(f32_to_bf16(p.data<float>()[k]));
  }
  Tensor logits_w;
  o.autocast = DType::f32;
  o.first_logits = &logits_w;
  auto w16 = evaluate(rounded, *data, o, dev);
  ASSERT_TRUE(w16.ok());
  const double rel_bf16 = logits_rel(logits16), rel_weights = logits_rel(logits_w);
  const double loss_rel = std::fabs(bf16->loss - f32->loss) / f32->loss;
  const double loss_rel_weights = std::fabs(w16->loss - f32->loss) / f32->loss;
  std::printf(
      "eval bf16 vs f32: loss %.6f vs %.6f (rel %.2e; weights rounded to bf16 alone: %.2e); "
      "logits norm-wise rel %.2e (weights rounded alone: %.2e)\n",
      bf16->loss, f32->loss, loss_rel, loss_rel_weights, rel_bf16, rel_weights);
  EXPECT_NE(bf16->loss, f32->loss);  // it did run in bf16
  // Weights of std 0.2 make this 2-layer model ill-conditioned (activations grow ~10x a
  // layer), so one bf16 rounding of the weights alone moves the logits by 1.2e-2 norm-wise
  // (observed). The bf16 forward also rounds every activation and GEMM input (a few more
  // roundings on each path): observed 2.6e-2 = 2.1x the weights' effect; bound 4x. The loss, a
  // mean over 1,024 tokens, moves less: observed 1.2e-4, bound 2^-9 (bf16's unit roundoff).
  EXPECT_LT(rel_bf16, 4 * rel_weights);
  EXPECT_LT(loss_rel, std::ldexp(1.0, -9));
  fs::remove(path);
}

TEST(Eval, UniformModelGivesLogVocabLossAndRejectsBadData) {
  Device dev(1);
  auto c = llama_preset("tiny");
  HfModel m;
  m.config = *c;
  m.specs = llama_param_specs(*c);
  // All-zero weights (norms one): every logit is 0, so the loss is exactly ln(V).
  m.params = init_llama_params(dev, m.specs, 0.0, 1);
  const std::string path = temp_dir("tokens") + ".u32";
  {
    std::vector<uint32_t> toks(1000);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint32_t>((i * 7) % 256);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(toks.data()),
            static_cast<std::streamsize>(toks.size() * 4));
  }
  auto data = TokenFile::open(path, TokenFormat::raw_u32);
  ASSERT_TRUE(data.ok());
  EvalOptions o;
  o.batch_size = 2;
  o.seq_len = 32;
  auto r = evaluate(m, *data, o, dev);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // 999 / 32 = 31 windows -> 15 batches of 2 x 32 predicted tokens.
  EXPECT_EQ(r->batches, 15);
  EXPECT_EQ(r->tokens, 15 * 64);
  // Observed |loss - ln 256| = 0 to 4e-7: log-sum-exp of 256 zeros in f32.
  EXPECT_NEAR(r->loss, std::log(256.0), 1e-5);
  m.config.vocab_size = 100;  // the data holds ids up to 255
  auto bad = evaluate(m, *data, o, dev);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside the model's vocabulary of 100"),
            std::string::npos);
  fs::remove(path);
}

}  // namespace
}  // namespace lj
