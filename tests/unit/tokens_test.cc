// Token files: llm.c shards (uint16 and uint32), Megatron .bin/.idx, raw u16/u32, and the
// errors a damaged file gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "io/tokens.h"

namespace lj {
namespace {

class TokenFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "tok_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string p = dir_ + "/" + name;
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    return p;
  }
  template <class T>
  static void put(std::vector<uint8_t>* b, T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b->insert(b->end(), p, p + sizeof(T));
  }
  static std::vector<uint8_t> llmc(int32_t magic, int32_t version, int32_t count,
                                   const std::vector<uint32_t>& toks, int width) {
    std::vector<uint8_t> b;
    std::vector<int32_t> header(256, 0);
    header[0] = magic, header[1] = version, header[2] = count;
    for (int32_t h : header) put(&b, h);
    for (uint32_t t : toks) width == 2 ? put(&b, static_cast<uint16_t>(t)) : put(&b, t);
    return b;
  }
  std::string dir_;
};

TEST_F(TokenFiles, LlmcShardsBothWidths) {
  auto gpt2 = TokenFile::open(write("a.bin", llmc(20240520, 1, 3, {5, 65535, 7}, 2)));
  ASSERT_TRUE(gpt2.ok()) << gpt2.status().to_string();
  EXPECT_EQ(gpt2->format(), TokenFormat::llmc);
  EXPECT_EQ(gpt2->token_bytes(), 2);
  ASSERT_EQ(gpt2->size(), 3);
  EXPECT_EQ((*gpt2)[1], 65535u);
  auto llama = TokenFile::open(write("b.bin", llmc(20240801, 7, 2, {128000, 9}, 4)));
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  EXPECT_EQ(llama->token_bytes(), 4);
  EXPECT_EQ((*llama)[0], 128000u);
  EXPECT_EQ(llama->max_token(), 128000u);
}

TEST_F(TokenFiles, LlmcErrors) {
  auto truncated = TokenFile::open(write("t.bin", llmc(20240520, 1, 10, {1, 2, 3}, 2)));
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("header says 10 tokens"), std::string::npos);
  auto magic = TokenFile::open(write("m.bin", llmc(12345, 1, 1, {1}, 2)), TokenFormat::llmc);
  ASSERT_FALSE(magic.ok());
  EXPECT_NE(magic.status().message().find("wrong magic 12345"), std::string::npos);
  auto version = TokenFile::open(write("v.bin", llmc(20240801, 3, 1, {1}, 4)));
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("version 3, expected 7"), std::string::npos);
  auto short_header = TokenFile::open(write("s.bin", {1, 2, 3, 4, 5, 6, 7, 8}), TokenFormat::llmc);
  ASSERT_FALSE(short_header.ok());
  EXPECT_NE(short_header.status().message().find("1024-byte llm.c header"), std::string::npos);
}

TEST_F(TokenFiles, MegatronBinIdx) {
  std::vector<uint8_t> bin;
  for (uint16_t t : {3, 1, 4, 1, 5}) put(&bin, t);
  std::vector<uint8_t> idx;
  for (char c : std::string("MMIDIDX\0\0", 9)) idx.push_back(static_cast<uint8_t>(c));
  put(&idx, uint64_t{1});
  idx.push_back(8);  // uint16
  put(&idx, uint64_t{1});
  put(&idx, uint64_t{2});
  put(&idx, int32_t{5});
  put(&idx, int64_t{0});
  put(&idx, int64_t{0});
  put(&idx, int64_t{1});
  write("corpus.idx", idx);
  auto f = TokenFile::open(write("corpus.bin", bin));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->format(), TokenFormat::megatron);
  ASSERT_EQ(f->size(), 5);
  EXPECT_EQ((*f)[4], 5u);
  // A .bin that is not the one the index describes (one token more) is refused.
  std::vector<uint8_t> longer = bin;
  put(&longer, uint16_t{9});
  write("corpus.bin", longer);
  auto other = TokenFile::open(dir_ + "/corpus.bin");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("lists 5 tokens (10 bytes), the file holds 12 bytes"),
            std::string::npos)
      << other.status().message();
  write("corpus.bin", bin);
  idx[0] = 'X';
  write("corpus.idx", idx);
  auto bad = TokenFile::open(dir_ + "/corpus.bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a Megatron index"), std::string::npos);
}

TEST_F(TokenFiles, RawAndErrors) {
  std::vector<uint8_t> b;
  for (uint32_t t : {10, 20, 30}) put(&b, t);
  auto u32 = TokenFile::open(write("r.u32", b));
  ASSERT_TRUE(u32.ok());
  EXPECT_EQ(u32->format(), TokenFormat::raw_u32);
  EXPECT_EQ(u32->size(), 3);
  auto u16 = TokenFile::open(dir_ + "/r.u32", TokenFormat::raw_u16);
  ASSERT_TRUE(u16.ok());
  EXPECT_EQ(u16->size(), 6);
  EXPECT_EQ((*u16)[2], 20u);
  auto odd = TokenFile::open(write("odd.bin", {1, 2, 3}));
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("not a whole number of 4-byte tokens"), std::string::npos);
  EXPECT_EQ(TokenFile::open(dir_ + "/missing.bin").status().code(), StatusCode::not_found);
  EXPECT_FALSE(TokenFile::open(write("empty.bin", {})).ok());
  TokenFormat fmt;
  EXPECT_TRUE(parse_token_format("megatron", &fmt));
  EXPECT_FALSE(parse_token_format("parquet", &fmt));
}

}  // namespace
}  // namespace lj
