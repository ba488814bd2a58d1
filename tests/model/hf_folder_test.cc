// HF model folders: save and load round trip (single file and sharded), and refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

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
    ASSERT_TRUE(save_hf_model(dir, *c, specs, params, shard).ok());
    EXPECT_EQ(fs::exists(dir + "/model.safetensors.index.json"), shard < 1'000'000);
    auto m = load_hf_model(dir, dev);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(m->params.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_EQ(std::memcmp(m->params[i].raw(), params[i].raw(), params[i].bytes()), 0)
          << specs[i].name;
    }
    // An existing folder is never overwritten.
    Status again = save_hf_model(dir, *c, specs, params, shard);
    EXPECT_FALSE(again.ok());
    EXPECT_NE(again.message().find("already exists"), std::string::npos);
    fs::remove_all(dir);
  }
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
