// tokenizer.json parity with HF tokenizers: the ids of every corpus line, with the
// post-processor, must equal those tokenizers 0.23.3 gave (tools/ref/make_tokenizer_fixtures.py);
// decode must give the text back, or exactly HF's decode where that differs. Plus the errors a
// bad tokenizer.json or bad text gives.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenize/regex.h"
#include "tokenize/tokenizer.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

const std::string kDir = LJ_TOKENIZE_FIXTURE_DIR;

std::vector<std::string> text_lines(const std::string& file) {
  std::vector<std::string> lines;
  std::ifstream f(kDir + "/" + file);
  std::string line;
  while (std::getline(f, line)) lines.push_back(nlohmann::json::parse(line)["text"]);
  return lines;
}

std::vector<std::string> corpus() {
  return text_lines("corpus.jsonl");
}

// Text whose Unicode normalization forms differ (tools/ref/make_tokenizer_fixtures.py).
std::vector<std::string> unicode_lines() {
  return text_lines("unicode.jsonl");
}

std::vector<std::vector<uint32_t>> expected_ids(const std::string& name) {
  std::vector<std::vector<uint32_t>> out;
  std::ifstream f(kDir + "/" + name + ".ids.txt");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::vector<uint32_t> ids;
    uint32_t id;
    while (s >> id) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::string show(const std::vector<uint32_t>& ids) {
  std::string s;
  for (const uint32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Each line of `file` ({"name", "normalizer", ["pre_tokenizer",] "ids"}): the gpt2 tokenizer with
// those components must give HF's ids for lines[i]. Returns the number of variants.
int expect_gpt2_variants_match(const std::string& file, const std::vector<std::string>& lines) {
  std::ifstream base_file(kDir + "/gpt2.tokenizer.json");
  const auto base = nlohmann::json::parse(base_file);
  std::ifstream f(kDir + "/" + file);
  std::string line;
  int variants = 0;
  while (std::getline(f, line)) {
    const auto v = nlohmann::json::parse(line);
    auto j = base;
    j["normalizer"] = v["normalizer"];
    if (v.contains("pre_tokenizer")) j["pre_tokenizer"] = v["pre_tokenizer"];
    const std::string name = v["name"];
    auto tok = Tokenizer::from_json(j.dump(), name);
    EXPECT_TRUE(tok.ok()) << tok.status().to_string();
    if (!tok.ok()) continue;
    TokenizerSession session(**tok);
    size_t mismatched = 0;
    for (size_t i = 0; i < v["ids"].size(); ++i) {
      std::vector<uint32_t> ids;
      EXPECT_TRUE(session.encode(lines[i], true, &ids).ok()) << name << " line " << i;
      const auto want = v["ids"][i].get<std::vector<uint32_t>>();
      if (ids != want && ++mismatched <= 3)
        ADD_FAILURE() << name << " line " << i << " " << nlohmann::json(lines[i]).dump()
                      << "\n  ljperf: " << show(ids) << "\n  hf:     " << show(want);
    }
    EXPECT_EQ(mismatched, 0u) << name;
    ++variants;
  }
  return variants;
}

class Parity : public ::testing::TestWithParam<const char*> {};

TEST_P(Parity, IdsAndDecodeMatchHfTokenizers) {
  const std::string name = GetParam();
  auto tok = Tokenizer::load(kDir + "/" + name + ".tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const auto want = expected_ids(name);
  auto lines = corpus();
  if (name == "qwen2") {  // its ids cover 500 corpus lines, then the Unicode lines
    const auto extra = unicode_lines();
    ASSERT_GT(want.size(), extra.size());
    lines.resize(want.size() - extra.size());
    lines.insert(lines.end(), extra.begin(), extra.end());
  }
  ASSERT_GT(want.size(), 400u);
  ASSERT_LE(want.size(), lines.size());
  std::map<size_t, std::string> hf_decode;  // lines whose decode is not the text
  {
    std::ifstream f(kDir + "/" + name + ".decode.jsonl");
    std::string line;
    while (std::getline(f, line)) {
      const auto j = nlohmann::json::parse(line);
      hf_decode[j["line"].get<size_t>()] = j["text"].get<std::string>();
    }
  }
  TokenizerSession session(**tok);
  size_t mismatched = 0, ids_compared = 0, decode_mismatched = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<uint32_t> ids;
    const Status s = session.encode(lines[i], true, &ids);
    ASSERT_TRUE(s.ok()) << "line " << i << ": " << s.to_string();
    ids_compared += want[i].size();
    if (ids != want[i]) {
      if (++mismatched <= 5)
        ADD_FAILURE() << name << " line " << i << " " << nlohmann::json(lines[i]).dump()
                      << "\n  ljperf: " << show(ids) << "\n  hf:     " << show(want[i]);
    }
    auto d = (*tok)->decode(want[i], true);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const auto it = hf_decode.find(i);
    const std::string& expect = it == hf_decode.end() ? lines[i] : it->second;
    if (*d != expect && ++decode_mismatched <= 5)
      ADD_FAILURE() << name << " decode line " << i << "\n  ljperf: " << nlohmann::json(*d).dump()
                    << "\n  hf:     " << nlohmann::json(expect).dump();
  }
  std::printf(
      "[ parity ] %s: %zu lines, %zu ids compared, %zu lines mismatched, %zu decodes "
      "mismatched\n",
      name.c_str(), want.size(), ids_compared, mismatched, decode_mismatched);
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(decode_mismatched, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Parity,
                         ::testing::Values("llama3", "gpt2", "llama2", "mistral", "qwen2"));

// The gpt2 tokenizer with each Unicode normalizer (NFC, NFD, NFKC, NFKD, NFKC then Strip): HF's
// ids on text whose forms differ, then on corpus lines.
TEST(Tokenizer, UnicodeNormalizersMatchHfTokenizers) {
  std::vector<std::string> lines = unicode_lines();
  ASSERT_GE(lines.size(), 20u);
  const auto more = corpus();
  lines.insert(lines.end(), more.begin(), more.end());
  EXPECT_EQ(expect_gpt2_variants_match("normalizers.jsonl", lines), 5);
}

// The gpt2 tokenizer with other normalizers and pre-tokenizers (every Split behavior, invert,
// String patterns, ByteLevel's prefix space, Strip, Replace by regex, Metaspace): HF's ids.
TEST(Tokenizer, ComponentVariantsMatchHfTokenizers) {
  EXPECT_GE(expect_gpt2_variants_match("variants.jsonl", corpus()), 9);
}

// Encoding without special tokens is the same ids without the template's.
TEST(Tokenizer, TemplateOnlyWithSpecialTokens) {
  auto tok = Tokenizer::load(kDir + "/llama3.tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  ASSERT_EQ((*tok)->template_prefix().size(), 1u);
  const uint32_t bos = *(*tok)->token_to_id("<|begin_of_text|>");
  EXPECT_EQ((*tok)->template_prefix()[0], bos);
  TokenizerSession s(**tok);
  std::vector<uint32_t> with, without;
  ASSERT_TRUE(s.encode("hello world", true, &with).ok());
  ASSERT_TRUE(s.encode("hello world", false, &without).ok());
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with[0], bos);
  EXPECT_TRUE(std::equal(without.begin(), without.end(), with.begin() + 1));
}

TEST(Tokenizer, InvalidUtf8IsAnError) {
  auto tok = Tokenizer::load(kDir + "/llama3.tokenizer.json");
  ASSERT_TRUE(tok.ok());
  TokenizerSession s(**tok);
  std::vector<uint32_t> ids;
  const Status st = s.encode("ok \xC3\x28 bad", false, &ids);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("invalid UTF-8 at byte 3"), std::string::npos) << st.message();
}

std::string with_replaced(const std::string& name, const std::string& key,
                          const nlohmann::json& value) {
  std::ifstream f(kDir + "/" + name + ".tokenizer.json");
  auto j = nlohmann::json::parse(f);
  j[key] = value;
  return j.dump();
}

TEST(Tokenizer, UnsupportedComponentsAreNamed) {
  struct Case {
    std::string key;
    nlohmann::json value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"normalizer", {{"type", "BertNormalizer"}}, "normalizer \"BertNormalizer\""},
      {"normalizer", {{"type", "Lowercase"}}, "normalizer \"Lowercase\""},
      {"pre_tokenizer", {{"type", "Whitespace"}}, "pre_tokenizer \"Whitespace\""},
      {"decoder", {{"type", "WordPiece"}}, "decoder \"WordPiece\""},
      {"post_processor", {{"type", "BertProcessing"}}, "post_processor \"BertProcessing\""},
      {"model", {{"type", "Unigram"}, {"vocab", nlohmann::json::array()}}, "model \"Unigram\""},
  };
  for (const auto& c : cases) {
    auto t = Tokenizer::from_json(with_replaced("llama3", c.key, c.value), "t.json");
    ASSERT_FALSE(t.ok()) << c.key;
    EXPECT_EQ(t.status().message(), "t.json: unsupported tokenizer component: " + c.message);
    EXPECT_FALSE(t.status().hint().empty());
  }
}

TEST(Tokenizer, MalformedFilesAreErrors) {
  EXPECT_FALSE(Tokenizer::from_json("{\"model\": ", "t.json").ok());
  EXPECT_FALSE(Tokenizer::from_json("[]", "t.json").ok());
  EXPECT_FALSE(Tokenizer::load(kDir + "/no-such-folder").ok());
  // A merge naming a token outside the vocab.
  auto bad = Tokenizer::from_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "b"]]}})", "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not in the vocab"), std::string::npos);
  // Deeply nested Sequences stop at a bound instead of recursing without limit.
  nlohmann::json n = nullptr;
  for (int i = 0; i < 50; ++i) n = {{"type", "Sequence"}, {"normalizers", {n}}};
  EXPECT_FALSE(Tokenizer::from_json(with_replaced("llama3", "normalizer", n), "t.json").ok());
  // A regex that does not compile.
  auto re = Tokenizer::from_json(
      with_replaced(
          "llama3", "pre_tokenizer",
          {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}}),
      "t.json");
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.status().message().find("does not compile"), std::string::npos);
}

TEST(Utf8, LossyMatchesRust) {
  // Rust's from_utf8_lossy: one U+FFFD per maximal invalid subsequence.
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x98"), "a\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xE2\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

TEST(Regex, OnigurumaWhitespaceIncludesNel) {
  EXPECT_EQ(adapt_oniguruma_pattern(R"(\s+(?!\S)|[^\s\p{L}])"),
            R"([\s\x{85}]+(?![^\s\x{85}])|[^\s\x{85}\p{L}])");
}

}  // namespace
}  // namespace lj::tok
