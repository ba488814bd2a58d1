// ljperf tokenize's pipeline (tokenize/pipeline.h): the files it writes are read back by
// io/tokens.h with the ids the tokenizer gives, in input order whatever the thread count; gz
// and plain inputs agree; the validation split is deterministic; errors and interrupts leave no
// output.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/tokens.h"
#include "tokenize/corpus.h"
#include "tokenize/pipeline.h"

namespace lj::tok {
namespace {

const std::string kFixtures = LJ_TOKENIZE_FIXTURE_DIR;

class TokenizePipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "tokpipe_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    auto t = Tokenizer::load(kFixtures + "/llama3.tokenizer.json");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tok_ = *t;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
    return dir_ + "/" + name;
  }
  std::vector<uint32_t> expected(const std::vector<std::string>& docs) {
    TokenizerSession s(*tok_);
    std::vector<uint32_t> ids;
    for (const auto& d : docs) EXPECT_TRUE(s.encode(d, true, &ids).ok());
    return ids;
  }
  static std::vector<uint32_t> read(const std::string& path) {
    auto f = TokenFile::open(path);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    std::vector<uint32_t> ids;
    if (f.ok())
      for (int64_t i = 0; i < f->size(); ++i) ids.push_back((*f)[i]);
    return ids;
  }
  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      const std::string n = e.path().filename();
      if (n.find(".tmp.") != std::string::npos || n.find("out") == 0) out.push_back(n);
    }
    return out;
  }
  std::string dir_;
  std::shared_ptr<const Tokenizer> tok_;
};

TEST_F(TokenizePipeline, LlmcAndMegatronReadBackInOrder) {
  std::vector<std::string> docs;
  std::string text;
  for (int i = 0; i < 20000; ++i) {  // several chunks
    docs.push_back("document " + std::to_string(i) + " with some words, ünïcode and 😀");
    text += docs.back() + "\n";
  }
  const std::string in = write("in.txt", text);
  const auto want = expected(docs);
  for (const int threads : {1, 3}) {
    CorpusOptions o;
    o.inputs = {in};
    o.threads = threads;
    o.out = dir_ + "/llmc.bin";
    auto r = tokenize_corpus(*tok_, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->documents, docs.size());
    EXPECT_EQ(read(dir_ + "/llmc.bin"), want);
    EXPECT_EQ(TokenFile::open(dir_ + "/llmc.bin")->token_bytes(), 2);
    o.format = OutputFormat::megatron;
    o.out = dir_ + "/meg";
    r = tokenize_corpus(*tok_, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(read(dir_ + "/meg.bin"), want);
  }
}

TEST_F(TokenizePipeline, GzipAndJsonlInputsGiveTheSameIds) {
  const std::vector<std::string> docs = {"first line", "  second\tline  ", "third: 123 456"};
  std::string text, jsonl;
  for (const auto& d : docs) {
    text += d + "\n";
    jsonl += nlohmann::json{{"meta", 1}, {"text", d}}.dump() + "\n";
  }
  const std::string gz = dir_ + "/in.txt.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  const std::string js = write("in.jsonl", jsonl);
  for (const std::string& in : {gz, js}) {
    CorpusOptions o;
    o.inputs = {in};
    o.out = dir_ + "/o.bin";
    auto r = tokenize_corpus(*tok_, o);
    ASSERT_TRUE(r.ok()) << in << ": " << r.status().to_string();
    EXPECT_EQ(read(dir_ + "/o.bin"), expected(docs)) << in;
  }
}

TEST_F(TokenizePipeline, ValidationSplitIsDeterministic) {
  int val = 0;
  for (uint64_t i = 0; i < 100000; ++i) val += is_validation_document(i, 0.05) ? 1 : 0;
  // Binomial(100000, 0.05): sd 69; 5000 +- 400 is a 5.8 sd bound for a fixed hash.
  EXPECT_NEAR(val, 5000, 400);
  EXPECT_FALSE(is_validation_document(7, 0));
  std::string text;
  for (int i = 0; i < 500; ++i) text += "doc " + std::to_string(i) + "\n";
  const std::string in = write("in.txt", text);
  CorpusOptions o;
  o.inputs = {in};
  o.val_fraction = 0.2;
  o.out = dir_ + "/a.bin";
  auto a = tokenize_corpus(*tok_, o);
  o.threads = 4;
  o.out = dir_ + "/b.bin";
  auto b = tokenize_corpus(*tok_, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->val_documents, 50u);
  EXPECT_EQ(a->val_documents + a->documents, 500u);
  EXPECT_EQ(read(dir_ + "/a_val.bin"), read(dir_ + "/b_val.bin"));
  EXPECT_EQ(read(dir_ + "/a.bin"), read(dir_ + "/b.bin"));
}

TEST_F(TokenizePipeline, WideVocabWritesUint32) {
  // The fixture tokenizer plus an added token with an id past 65535.
  std::ifstream f(kFixtures + "/llama3.tokenizer.json");
  auto j = nlohmann::json::parse(f);
  j["added_tokens"].push_back({{"id", 70000},
                               {"content", "<|wide|>"},
                               {"special", true},
                               {"normalized", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"single_word", false}});
  auto wide = Tokenizer::from_json(j.dump(), "wide.json");
  ASSERT_TRUE(wide.ok()) << wide.status().to_string();
  EXPECT_EQ((*wide)->vocab_size(), 70001u);
  const std::string in = write("in.txt", "a <|wide|> b\n");
  CorpusOptions o;
  o.inputs = {in};
  o.out = dir_ + "/w.bin";
  ASSERT_TRUE(tokenize_corpus(**wide, o).ok());
  auto t = TokenFile::open(dir_ + "/w.bin");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->token_bytes(), 4);
  const auto ids = read(dir_ + "/w.bin");
  EXPECT_NE(std::find(ids.begin(), ids.end(), 70000u), ids.end());
}

TEST_F(TokenizePipeline, ErrorsAndInterruptsLeaveNothing) {
  const std::string bad = write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 5}\n");
  CorpusOptions o;
  o.inputs = {bad};
  o.out = dir_ + "/out.bin";
  o.val_fraction = 0.5;
  auto r = tokenize_corpus(*tok_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad.jsonl:2: \"text\" is not a string"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(leftovers().empty());
  o.skip_bad_lines = true;
  r = tokenize_corpus(*tok_, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->skipped_lines, 1u);

  std::filesystem::remove(dir_ + "/out.bin");
  std::filesystem::remove(dir_ + "/out_val.bin");
  std::atomic<bool> stop{true};
  o.stop = &stop;
  o.format = OutputFormat::megatron;
  r = tokenize_corpus(*tok_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("interrupted"), std::string::npos);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(TokenizePipeline, LongLinesAreBoundedOrSkipped) {
  std::string text = "short\n" + std::string(3 << 20, 'x') + "\nafter\n";
  const std::string in = write("long.txt", text);
  auto reader = LineReader::open(in, 1 << 20);
  ASSERT_TRUE(reader.ok());
  std::string line;
  bool too_long = false;
  ASSERT_TRUE(*reader->next(&line, true, &too_long));
  EXPECT_EQ(line, "short");
  ASSERT_TRUE(*reader->next(&line, true, &too_long));
  EXPECT_TRUE(too_long);
  EXPECT_TRUE(line.empty());
  ASSERT_TRUE(*reader->next(&line, true, &too_long));
  EXPECT_EQ(line, "after");
  EXPECT_EQ(reader->line_number(), 3u);
  EXPECT_FALSE(*reader->next(&line, true, &too_long));

  CorpusOptions o;
  o.inputs = {in};
  o.out = dir_ + "/out.bin";
  o.max_doc_bytes = 1 << 20;
  auto r = tokenize_corpus(*tok_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("long.txt:2: a line longer than 1 MiB"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(leftovers().empty());
}

}  // namespace
}  // namespace lj::tok
