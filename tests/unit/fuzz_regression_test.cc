// Regression cases from fuzzing the parsers of untrusted files (tests/fuzz/, tools/fuzz.sh), and
// the limits of docs/limits.md: each hostile input, as bytes, must give a clean Status error.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/ablation_report.h"
#include "core/text_file.h"
#include "io/deepspeed_config.h"
#include "io/safetensors.h"
#include "io/tokens.h"
#include "models/config.h"
#include "models/hf_config.h"
#include "tokenize/corpus.h"
#include "tokenize/tokenizer.h"
#include "train/checkpoint_files.h"

namespace lj {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> safetensors_bytes(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i)
    b[static_cast<size_t>(i)] = static_cast<uint8_t>(header.size() >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes);
  return b;
}

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("lj_fuzz_regression_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

bool has(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// Finding (deepspeed_config, 15 s): a number beyond double's range made nlohmann-json throw
// out_of_range, which only parse_error was caught for: std::terminate.
TEST(FuzzRegression, DeepSpeedNumberOverflowIsAnError) {
  auto c = parse_deepspeed_config("{\"fp16\": {\"enabled\": \"auto\", \"loss_scale\": 2e308}}",
                                  "ds.json", RunSettings());
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(has(c.status(), "ds.json: not valid JSON")) << c.status().message();
}

TEST(FuzzRegression, SafetensorsRankAndTensorCountAreBounded) {
  auto rank9 = parse_safetensors(safetensors_bytes(
      R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1));
  ASSERT_FALSE(rank9.ok());
  EXPECT_TRUE(has(rank9.status(), "rank 9, above the limit of 8")) << rank9.status().message();
  auto rank8 = parse_safetensors(safetensors_bytes(
      R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1));
  EXPECT_TRUE(rank8.ok()) << rank8.status().message();
  // A product of dimensions past 2^64 is an overflow, not a wrapped small size.
  auto overflow = parse_safetensors(safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4));
  ASSERT_FALSE(overflow.ok());
  EXPECT_TRUE(has(overflow.status(), "overflows")) << overflow.status().message();
  std::vector<uint8_t> huge(8, 0);
  huge[0] = 0x01, huge[1] = 0xe1, huge[2] = 0xf5, huge[3] = 0x05;  // 100,000,001
  auto header = parse_safetensors(huge);
  ASSERT_FALSE(header.ok());
  EXPECT_TRUE(has(header.status(), "above the 100,000,000-byte limit"));
}

TEST(FuzzRegression, JsonFilesAreBoundedBeforeParsing) {
  const std::string big(kMaxHfConfigBytes + 1, ' ');
  auto c = parse_hf_config(big, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(has(c.status(), "above the 16777216-byte limit")) << c.status().message();
  EXPECT_FALSE(parse_deepspeed_config(big, "ds.json", RunSettings()).ok());
  EXPECT_FALSE(parse_trainer_state(big, "trainer_state.json").ok());
  EXPECT_FALSE(parse_sharded_manifest(big, "manifest.json").ok());
  const std::string dir = temp_dir("json");
  write_bytes(dir + "/config.json", big);
  auto read = read_text_file(dir + "/config.json", "", kMaxHfConfigBytes);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(has(read.status(), "larger than the 16777216-byte limit"));
  auto loaded = load_hf_config(dir + "/config.json");
  EXPECT_FALSE(loaded.ok());
  fs::remove_all(dir);
}

// Megatron .idx counts are checked against the index's size (with overflow checks).
TEST(FuzzRegression, MegatronIndexCountsMustFitTheIndex) {
  const std::string dir = temp_dir("megatron");
  std::string idx("MMIDIDX\0\0", 9);
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) idx.push_back(static_cast<char>(v >> (8 * i)));
  };
  put(1, 8);                  // version
  put(8, 1);                  // uint16
  put(uint64_t{1} << 62, 8);  // sequences: 12 x 2^62 overflows
  put(uint64_t{1} << 62, 8);  // documents
  write_bytes(dir + "/c.idx", idx);
  write_bytes(dir + "/c.bin", std::string(8, '\0'));
  auto t = TokenFile::open(dir + "/c.bin");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(has(t.status(), "do not fit its 34 bytes")) << t.status().message();
  write_bytes(dir + "/c.idx", idx.substr(0, 20));
  auto short_idx = TokenFile::open(dir + "/c.bin");
  ASSERT_FALSE(short_idx.ok());
  EXPECT_TRUE(has(short_idx.status(), "shorter than its 34-byte header"));
  fs::remove_all(dir);
}

// Integers out of range (or floats where integers belong) in checkpoint JSON are errors, never a
// conversion (a float such as 1e300 converted to int is undefined behaviour).
TEST(FuzzRegression, CheckpointJsonFieldsAreRangeChecked) {
  auto neg = parse_trainer_state(
      R"({"step":-1,"optimizer_steps":0,"data_position":0,"skipped_steps":0,"seed":1})", "ts");
  ASSERT_FALSE(neg.ok());
  EXPECT_TRUE(has(neg.status(), "'step' is out of range")) << neg.status().message();
  auto real = parse_trainer_state(
      R"({"step":1.5,"optimizer_steps":0,"data_position":0,"skipped_steps":0,"seed":1})", "ts");
  EXPECT_FALSE(real.ok());

  // fp16's loss scaler state: round trips; a scale that is not a positive finite number (1e400
  // parses as inf, which JSON cannot write back) is refused.
  const std::string base =
      R"({"step":3,"optimizer_steps":1,"data_position":0,"skipped_steps":2,"seed":1,)";
  auto ls =
      parse_trainer_state(base + R"("loss_scale":{"scale":32768,"iter":3,"last_overflow_iter":1,)" +
                              R"("hysteresis_left":1,"overflows":2}})",
                          "ts");
  ASSERT_TRUE(ls.ok()) << ls.status().message();
  ASSERT_TRUE(ls->loss_scale.has_value());
  auto again = parse_trainer_state(trainer_state_json(*ls), "ts");
  ASSERT_TRUE(again.ok() && again->loss_scale.has_value());
  EXPECT_EQ(again->loss_scale->scale, 32768);
  EXPECT_EQ(again->loss_scale->last_overflow_iter, 1);
  EXPECT_EQ(again->loss_scale->overflows, 2);
  for (const char* scale : {"1e400", "0", "-2", "\"x\""}) {
    auto bad = parse_trainer_state(base + R"("loss_scale":{"scale":)" + scale +
                                       R"(,"iter":0,"last_overflow_iter":-1,"hysteresis_left":2,)" +
                                       R"("overflows":0}})",
                                   "ts");
    EXPECT_FALSE(bad.ok()) << scale;
  }
  EXPECT_FALSE(parse_trainer_state(base + R"("loss_scale":{"scale":1,"iter":0,)" +
                                       R"("last_overflow_iter":-2,"hysteresis_left":2,)" +
                                       R"("overflows":0}})",
                                   "ts")
                   .ok());

  const std::string state =
      R"("trainer_state":{"step":1,"optimizer_steps":1,"data_position":0,"skipped_steps":0,"seed":1})";
  auto manifest = [&](const std::string& world, const std::string& file, const std::string& fmt) {
    return "{\"format\":" + fmt + ",\"version\":1," + state + ",\"world_size\":" + world +
           ",\"zero_stage\":1,\"flat_layout\":{\"numel\":4},\"parameters\":{\"file\":\"" + file +
           "\",\"rank\":0,\"bytes\":10,\"crc32c\":1},\"optimizer_shards\":[{\"file\":\"o\","
           "\"rank\":0,\"begin\":0,\"end\":4,\"bytes\":1,\"crc32c\":2}]}";
  };
  const std::string fmt = "\"ljperf-sharded-checkpoint\"";
  auto good = parse_sharded_manifest(manifest("1", "model.safetensors", fmt), "m");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->optimizer_shards.size(), 1u);
  auto world = parse_sharded_manifest(manifest("1e300", "model.safetensors", fmt), "m");
  ASSERT_FALSE(world.ok());
  EXPECT_TRUE(has(world.status(), "world_size")) << world.status().message();
  // A non-string "format" used to throw type_error out of load_checkpoint_for_rank.
  EXPECT_FALSE(parse_sharded_manifest(manifest("1", "model.safetensors", "1"), "m").ok());
  // A file outside the step folder is refused before anything is opened.
  auto escape = parse_sharded_manifest(manifest("1", "../../etc/passwd", fmt), "m");
  ASSERT_FALSE(escape.ok());
  EXPECT_TRUE(has(escape.status(), "not a file name inside the step folder"));
}

// Finding (tokenizer, issue 33, 71 s): a TemplateProcessing item {"Sequence": {"id": 5}} made
// nlohmann's value("id", "") throw type_error.302 out of Tokenizer::from_json: `ljperf tokenize`
// aborted (exit 134). tests/fuzz/corpus/tokenizer/template_sequence_id_number.json.
TEST(FuzzRegression, TokenizerTemplateIdOfAnotherTypeIsAnError) {
  const std::string head =
      R"({"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null,)"
      R"( "decoder": null, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},)"
      R"( "merges": ["a b"]}, "post_processor": {"type": "TemplateProcessing", "single": [)"
      R"({"SpecialToken": {"id": "a", "type_id": 0}}, {"Sequence": {"id": )";
  const std::string tail =
      R"(, "type_id": 0}}], "special_tokens": {"a": {"id": "a", "ids": [0], "tokens": ["a"]}}}})";
  auto ok = tok::Tokenizer::from_json(head + "\"A\"" + tail, "tok/tokenizer.json");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  auto t = tok::Tokenizer::from_json(head + "5" + tail, "tok/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "tok/tokenizer.json: tokenizer.json: post_processor.single[1].Sequence.id must be a "
            "string, got 5");
  // The checked-in regression input of tools/fuzz.sh --replay reaches the same check.
  auto file = read_text_file(std::string(LJ_TOKENIZE_FIXTURE_DIR) +
                             "/../../fuzz/corpus/tokenizer/template_sequence_id_number.json");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto replay = tok::Tokenizer::from_json(*file, "tokenizer.json");
  ASSERT_FALSE(replay.ok());
  EXPECT_TRUE(has(replay.status(), "post_processor.single[1].Sequence.id must be a string"))
      << replay.status().message();
}

// Finding (deepspeed_config, issue 33, 356 s): gradient_accumulation_steps 6666666666666662662
// made micro x accum x world overflow int64 (undefined behaviour) before it was compared with
// train_batch_size. tests/fuzz/corpus/deepspeed_config/batch_product_overflow.json.
TEST(FuzzRegression, DeepSpeedBatchProductOverflowIsAnError) {
  RunSettings run;
  run.world_size = 2;
  auto all3 =
      parse_deepspeed_config(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,)"
                             R"( "gradient_accumulation_steps": 6666666666666662662})",
                             "ds.json", run);
  ASSERT_FALSE(all3.ok());
  EXPECT_EQ(all3.status().message(),
            "ds.json: gradient_accumulation_steps: train_micro_batch_size_per_gpu 2 x "
            "gradient_accumulation_steps 6666666666666662662 x world_size 2 overflows a 64-bit "
            "integer");
  // Each product of the batch resolution: micro x world, accum x world, micro x accum x world.
  for (
      const char* text :
      {R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 6666666666666662662})",
       R"({"train_batch_size": 8, "gradient_accumulation_steps": 6666666666666662662})",
       R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4611686018427387904})"}) {
    auto c = parse_deepspeed_config(text, "ds.json", run);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_TRUE(has(c.status(), "overflows a 64-bit integer")) << c.status().message();
  }
  // Sizes that fit still resolve as before.
  auto fits = parse_deepspeed_config(
      R"({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 5})", "ds.json", run);
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  EXPECT_EQ(fits->train_batch_size, 30);
  auto file = read_text_file(std::string(LJ_TOKENIZE_FIXTURE_DIR) +
                             "/../../fuzz/corpus/deepspeed_config/batch_product_overflow.json");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto replay = parse_deepspeed_config(*file, "ds.json", run);
  ASSERT_FALSE(replay.ok());
  EXPECT_TRUE(has(replay.status(), "gradient_accumulation_steps")) << replay.status().message();
  EXPECT_TRUE(has(replay.status(), "overflows")) << replay.status().message();
}

// A config.json whose sizes multiply past int64 (vocab_size x hidden_size) is refused by
// validate(), before num_params() would overflow.
TEST(FuzzRegression, HfConfigSizesThatOverflowAreRefused) {
  auto c = parse_hf_config(
      R"({"vocab_size": 4294967296, "hidden_size": 4294967296, "intermediate_size": 2,)"
      R"( "num_hidden_layers": 1, "num_attention_heads": 1, "head_dim": 2})",
      "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(has(c.status(), "overflow a 64-bit parameter count")) << c.status().message();
}

// Finding (hf_config, issue 33, the JSON mutator's 14th input): num_hidden_layers 2^31 made
// validate() count the sparse layers one by one (2^31 steps) before any check bounded the
// number: a 10 s timeout under the fuzzer. tests/fuzz/corpus/hf_config/layers_2pow31.json.
TEST(FuzzRegression, HfConfigLayerCountIsBoundedBeforeLayersAreCounted) {
  const auto config = [](int64_t layers) {
    return R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 8,)"
           R"( "intermediate_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1,)"
           R"( "num_hidden_layers": )" +
           std::to_string(layers) + "}";
  };
  ASSERT_TRUE(parse_hf_config(config(kMaxHiddenLayers), "config.json").ok());
  auto past = parse_hf_config(config(kMaxHiddenLayers + 1), "config.json");
  ASSERT_FALSE(past.ok());
  EXPECT_TRUE(has(past.status(), "num_hidden_layers 65537 is past the limit of 65536"))
      << past.status().message();
  auto file = read_text_file(std::string(LJ_TOKENIZE_FIXTURE_DIR) +
                             "/../../fuzz/corpus/hf_config/layers_2pow31.json");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto replay = parse_hf_config(*file, "config.json");
  ASSERT_FALSE(replay.ok());
  EXPECT_TRUE(has(replay.status(), "num_hidden_layers 2147483648 is past the limit"))
      << replay.status().message();
}

// num_sparse_layers() counts without walking the layers: the same as the walk, with
// mlp_only_layers repeated, out of range, or on layers that are dense anyway.
TEST(FuzzRegression, SparseLayerCountMatchesTheWalk) {
  LlamaConfig c;
  c.moe.num_experts = 4;
  c.moe.top_k = 2;
  for (int64_t layers : {1, 2, 7, 12}) {
    for (int64_t step : {1, 2, 3}) {
      for (const std::vector<int64_t>& dense : std::vector<std::vector<int64_t>>{
               {}, {0}, {1, 1, 5}, {-1, 2, 11, 40}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}) {
        c.num_hidden_layers = layers;
        c.moe.decoder_sparse_step = step;
        c.moe.mlp_only_layers = dense;
        int64_t walk = 0;
        for (int64_t l = 0; l < layers; ++l) walk += c.is_sparse_layer(l) ? 1 : 0;
        EXPECT_EQ(c.num_sparse_layers(), walk) << layers << " layers, step " << step;
      }
    }
  }
}

// ablation --from's results.json: a field of another type threw type_error.302 out of
// runs_from_results_json (no try/catch on that path).
TEST(FuzzRegression, AblationResultsFieldOfAnotherTypeIsAnError) {
  auto r = cli::runs_from_results_json(
      R"({"rows": [{"kind": "ljperf", "available": true, "name": "c1", "runs": [)"
      R"({"tokens_per_s": 1.0, "peak_rss_bytes": 2.0, "round": "one"}]}]})",
      "results.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "results.json (c1): round must be a 32-bit integer, got \"one\"");
}

// Finding (corpus_reader, replaying its seeds): a line whose '\n' was already in the read buffer
// was returned whatever its length, so --max-doc-mb let through lines of up to one more 1 MiB
// read. The seed tests/fuzz/corpus/corpus_reader/long_lines_error, and the same at 1 MiB.
TEST(FuzzRegression, CorpusLineLimitHoldsWhenTheLineEndIsBuffered) {
  const std::string dir = temp_dir("corpus_lines");
  for (const uint64_t limit : {uint64_t{16}, uint64_t{1} << 20}) {
    const std::string in = dir + "/in.txt";
    write_bytes(
        in, "short\n" + std::string(limit + 1, 'y') + "\n" + std::string(limit, 'z') + "\nafter\n");
    for (const bool skip : {false, true}) {
      auto r = tok::LineReader::open(in, limit);
      ASSERT_TRUE(r.ok());
      std::string line;
      bool too_long = false;
      ASSERT_TRUE(*r->next(&line, skip, &too_long));
      EXPECT_EQ(line, "short");
      auto more = r->next(&line, skip, &too_long);
      if (!skip) {
        ASSERT_FALSE(more.ok());
        EXPECT_TRUE(has(more.status(), "in.txt:2: a line longer than")) << more.status().message();
        continue;
      }
      ASSERT_TRUE(more.ok() && *more);
      EXPECT_TRUE(too_long);
      EXPECT_TRUE(line.empty());
      ASSERT_TRUE(*r->next(&line, skip, &too_long));  // exactly the limit: accepted
      EXPECT_FALSE(too_long);
      EXPECT_EQ(line.size(), limit);
      ASSERT_TRUE(*r->next(&line, skip, &too_long));
      EXPECT_EQ(line, "after");
      EXPECT_EQ(r->line_number(), 4u);
      EXPECT_FALSE(*r->next(&line, skip, &too_long));
    }
  }
}

// Finding (corpus_reader, its truncated-gzip seed): gzread ends a gzip stream cut short as if it
// were complete (0 bytes, Z_BUF_ERROR), so `ljperf tokenize` took a truncated download for a
// shorter corpus and exited 0. Cut anywhere, even in the 8-byte trailer, it is now an error.
TEST(FuzzRegression, TruncatedGzipCorpusIsAnError) {
  const std::string dir = temp_dir("corpus_gz");
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "document " + std::to_string(i) + "\n";
  const std::string whole = dir + "/whole.txt.gz";
  gzFile f = gzopen(whole.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
  std::ifstream in(whole, std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const size_t cut : {size_t{0}, size_t{1}, size_t{4}, size_t{30}, gz.size() / 2}) {
    const std::string path = dir + "/cut" + std::to_string(cut) + ".txt.gz";
    write_bytes(path, gz.substr(0, gz.size() - cut));
    auto r = tok::LineReader::open(path, 1 << 20);
    ASSERT_TRUE(r.ok());
    std::string line;
    bool too_long = false;
    uint64_t lines = 0;
    Status end;
    for (;;) {
      auto more = r->next(&line, false, &too_long);
      if (!more.ok()) end = more.status();
      if (!more.ok() || !*more) break;
      ++lines;
    }
    if (cut == 0) {
      EXPECT_TRUE(end.ok()) << end.message();
      EXPECT_EQ(lines, 2000u);
    } else {
      ASSERT_FALSE(end.ok()) << "cut " << cut << ": " << lines << " lines and no error";
      EXPECT_TRUE(has(end, "unexpected end of file")) << end.message();
    }
  }
}

}  // namespace
}  // namespace lj
