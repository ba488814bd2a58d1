// Sharded checkpoints (train/sharded_checkpoint.h) in one process: the files and manifest, every
// rank's range at another world size and stage, checksums, one-process folders read as shards,
// and the step folder read as an HF model (what `ljperf export --hf` does).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "io/tensorboard.h"
#include "train/hf_model.h"
#include "train/sharded_checkpoint.h"

namespace lj {
namespace {
namespace fs = std::filesystem;

struct Fixture {
  Device dev{1};
  LlamaConfig model = *llama_preset("tiny");
  std::vector<ParamSpec> specs = llama_param_specs(model);
  std::string dir;
  std::vector<Tensor> params, m, v;  // per parameter; element k of the flat vector is k-based
  Fixture() {
    std::string tmpl = (fs::temp_directory_path() / "lj_sharded_ckpt_XXXXXX").string();
    LJ_CHECK(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    int64_t k = 0;
    for (const ParamSpec& s : specs) {
      for (auto* list : {&params, &m, &v})
        list->push_back(Tensor::empty(dev, DType::f32, s.dims, MemCategory::weights));
      for (int64_t i = 0; i < params.back().numel(); ++i, ++k) {
        params.back().data<float>()[i] = 0.001f * static_cast<float>(k % 1000);
        m.back().data<float>()[i] = static_cast<float>(k);
        v.back().data<float>()[i] = static_cast<float>(-k);
      }
    }
  }
  ~Fixture() { fs::remove_all(dir); }
  TrainerState state() const {
    TrainerState s;
    s.step = 7;
    s.optimizer_steps = 6;
    s.data_position = 84;
    s.skipped_steps = 1;
    s.seed = 99;
    s.fingerprint = "tiny B2 T16 A6";
    return s;
  }
  // Saved as one process at stage 0 through the sharded path (SelfCommunicator).
  std::string save_sharded() {
    SelfCommunicator self;
    const ShardedCheckpoint ck{state(), 0, &params, &m, &v};
    LJ_CHECK(save_sharded_checkpoint(self, dir, model, specs, ck, 0).ok());
    return latest_checkpoint_dir(dir);
  }
};

TEST(Crc32c, ExtendsAcrossChunks) {
  EXPECT_EQ(crc32c_extend(crc32c("1234", 4), "56789", 5), 0xE3069283u);
  EXPECT_EQ(crc32c_extend(0, "123456789", 9), crc32c("123456789", 9));
}

TEST(ShardedCheckpoint, ManifestListsTheShardsLayoutAndState) {
  Fixture f;
  const std::string step = f.save_sharded();
  EXPECT_EQ(fs::path(step).filename(), "step-7");
  auto text = read_text_file(step + "/manifest.json");
  ASSERT_TRUE(text.ok());
  const auto j = nlohmann::json::parse(*text);
  const int64_t numel = f.model.num_params();
  EXPECT_EQ(j["format"], "ljperf-sharded-checkpoint");
  EXPECT_EQ(j["world_size"], 1);
  EXPECT_EQ(j["zero_stage"], 0);
  EXPECT_EQ(j["flat_layout"]["numel"], numel);
  EXPECT_EQ(j["flat_layout"]["padding"], 0);
  EXPECT_EQ(j["trainer_state"]["data_position"], 84);
  ASSERT_EQ(j["optimizer_shards"].size(), 1u);
  const auto& s = j["optimizer_shards"][0];
  EXPECT_EQ(s["file"], "optimizer-rank-00000-of-00001.safetensors");
  EXPECT_EQ(s["begin"], 0);
  EXPECT_EQ(s["end"], numel);
  EXPECT_EQ(s["bytes"].get<int64_t>(),
            static_cast<int64_t>(fs::file_size(step + "/" + s["file"].get<std::string>())));
  EXPECT_TRUE(fs::exists(step + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(f.dir + "/step-7.tmp." + std::to_string(::getpid())));
}

TEST(ShardedCheckpoint, EveryRankOfAnotherWorldSizeGetsItsRange) {
  Fixture f;
  const std::string step = f.save_sharded();
  for (int world : {2, 3, 5}) {
    const FlatLayout layout = flat_layout_of(f.specs, world);
    std::vector<float> expect(static_cast<size_t>(layout.shard_numel()));
    for (int rank = 0; rank < world; ++rank) {
      auto r = load_checkpoint_for_rank(step, f.specs, 2, layout, rank, f.dev);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_TRUE(r->sharded);
      EXPECT_EQ(r->state.optimizer_steps, 6);
      ASSERT_EQ(r->m.size(), 1u);
      ASSERT_EQ(r->m[0].numel(), layout.shard_numel());
      const FlatRange shard = layout.shard(rank);
      for (int64_t k = 0; k < shard.size(); ++k) {
        const int64_t flat = shard.begin + k;
        // The flat vector holds k at element k; the padding reads as zeros.
        const float want = flat < layout.numel() ? static_cast<float>(flat) : 0.0f;
        ASSERT_EQ(r->m[0].data<float>()[k], want) << "world " << world << " rank " << rank;
        ASSERT_EQ(r->v[0].data<float>()[k], -want);
      }
    }
  }
  // Stage 0 (or one process): per parameter, as saved.
  auto whole = load_checkpoint(step, f.specs, f.dev);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  for (size_t i = 0; i < f.specs.size(); ++i) {
    ASSERT_EQ(std::memcmp(whole->m[i].raw(), f.m[i].raw(), f.m[i].bytes()), 0);
    ASSERT_EQ(std::memcmp(whole->params[i].raw(), f.params[i].raw(), f.params[i].bytes()), 0);
  }
}

TEST(ShardedCheckpoint, ADamagedShardIsAnErrorNamingTheFile) {
  Fixture f;
  const std::string step = f.save_sharded();
  const std::string shard = step + "/optimizer-rank-00000-of-00001.safetensors";
  {
    std::fstream io(shard, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-3, std::ios::end);
    io.put('\x7f');
  }
  auto r = load_checkpoint_for_rank(step, f.specs, 1, flat_layout_of(f.specs, 2), 1, f.dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(shard + " does not match the manifest"), std::string::npos)
      << r.status().message();
}

TEST(ShardedCheckpoint, AnotherModelIsRefused) {
  Fixture f;
  const std::string step = f.save_sharded();
  std::vector<ParamSpec> fewer(f.specs.begin(), f.specs.end() - 1);
  auto r = load_checkpoint_for_rank(step, fewer, 0, flat_layout_of(fewer, 1), 0, f.dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("parameters, this model has"), std::string::npos);
}

TEST(ShardedCheckpoint, AOneProcessCheckpointIsReadAsShards) {
  Fixture f;
  ASSERT_TRUE(
      save_checkpoint(f.dir, f.model, f.specs, Checkpoint{f.state(), f.params, f.m, f.v}, 0).ok());
  const std::string step = latest_checkpoint_dir(f.dir);
  ASSERT_FALSE(is_sharded_checkpoint(step));
  const FlatLayout layout = flat_layout_of(f.specs, 3);
  auto r = load_checkpoint_for_rank(step, f.specs, 1, layout, 2, f.dev);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->sharded);
  const FlatRange shard = layout.shard(2);
  for (int64_t k = 0; k < shard.size(); ++k) {
    const int64_t flat = shard.begin + k;
    ASSERT_EQ(r->m[0].data<float>()[k], flat < layout.numel() ? static_cast<float>(flat) : 0.0f);
  }
}

TEST(ShardedCheckpoint, TheStepFolderIsAnHfModelFolderForExport) {
  Fixture f;
  const std::string step = f.save_sharded();
  auto hf = load_hf_model(step, f.dev);
  ASSERT_TRUE(hf.ok()) << hf.status().to_string();
  ASSERT_EQ(hf->params.size(), f.params.size());
  for (size_t i = 0; i < f.params.size(); ++i)
    EXPECT_EQ(std::memcmp(hf->params[i].raw(), f.params[i].raw(), f.params[i].bytes()), 0);
}

}  // namespace
}  // namespace lj
