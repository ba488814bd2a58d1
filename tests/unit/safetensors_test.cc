// safetensors: a round trip, and a corpus of malformed files, each of which must give one clear
// error line and never a crash (this suite also runs under AddressSanitizer in CI).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"

namespace lj {
namespace {

std::vector<uint8_t> file_image(const std::string& header, size_t data_bytes,
                                uint64_t declared_len = UINT64_MAX) {
  std::vector<uint8_t> b(8);
  const uint64_t n = declared_len == UINT64_MAX ? header.size() : declared_len;
  for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0x3f);
  return b;
}

struct BadCase {
  const char* name;
  std::vector<uint8_t> bytes;
  const char* expect;  // a fragment of the error message
};

std::vector<BadCase> corpus() {
  const std::string ok1 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  return {
      {"empty file", {}, "shorter than the 8-byte header length"},
      {"truncated length", {1, 2, 3}, "shorter than the 8-byte header length"},
      {"header length past EOF", file_image(ok1, 8, 4096), "runs past the end"},
      {"oversized header", file_image(ok1, 8, 200'000'000), "above the 100,000,000-byte limit"},
      {"bad JSON", file_image(R"({"a":{"dtype":"F32",)", 8), "not valid JSON"},
      {"JSON not an object", file_image(R"([1,2,3])", 0), "not a JSON object"},
      {"unknown dtype", file_image(R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", 8),
       "unknown dtype 'F17'"},
      {"size/shape mismatch",
       file_image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "holds 8 bytes but F32 shape needs 12"},
      {"offsets out of file",
       file_image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
       "run past the 8-byte data buffer"},
      {"overlapping offsets",
       file_image(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           12),
       "overlaps"},
      {"gap between tensors",
       file_image(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
           12),
       "gap before tensor 'b'"},
      {"trailing bytes", file_image(ok1, 12), "data buffer is 12 bytes but the tensors cover 8"},
      {"duplicate names",
       file_image(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "more than once"},
      {"end before begin",
       file_image(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "end before they begin"},
      {"negative dim", file_image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "not a non-negative integer"},
      {"shape overflow",
       file_image(
           R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8),
       "overflows"},
      {"size overflow",
       file_image(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8),
       "overflows"},
      {"missing field", file_image(R"({"a":{"dtype":"F32","shape":[2]}})", 8),
       "lacks dtype, shape or data_offsets"},
      {"bad metadata", file_image(R"({"__metadata__":{"format":3}})", 0), "is not a string"},
  };
}

TEST(Safetensors, MalformedCorpusGivesOneLineErrors) {
  for (const BadCase& c : corpus()) {
    auto h = parse_safetensors(c.bytes);
    ASSERT_FALSE(h.ok()) << c.name;
    const std::string msg = h.status().to_string();
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(Safetensors, WriteReadRoundTripAndFormat) {
  const std::string dir = testing::TempDir() + "st_rt_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/x.safetensors";
  const std::vector<float> a{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  const std::vector<uint16_t> b{0x3f80, 0xc000};  // bf16 1.0, -2.0
  ASSERT_TRUE(write_safetensors(
                  path,
                  {{"w.a", DType::f32, {2, 3}, a.data()}, {"w.b", DType::bf16, {2}, b.data()}},
                  {{"note", "hi"}})
                  .ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->header().metadata.at("format"), "pt");
  EXPECT_EQ(f->header().metadata.at("note"), "hi");
  EXPECT_EQ(f->header().data_offset % 8, 0u);  // header padded to a multiple of 8
  const SafetensorsEntry* ea = f->find("w.a");
  ASSERT_NE(ea, nullptr);
  EXPECT_EQ(ea->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> got(6);
  ASSERT_TRUE(f->read_f32(*ea, got).ok());
  EXPECT_EQ(got, a);
  std::vector<float> gb(2);
  ASSERT_TRUE(f->read_f32(*f->find("w.b"), gb).ok());
  EXPECT_EQ(gb, (std::vector<float>{1.0f, -2.0f}));
  // No temporary left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, MissingFileAndUnwritableDirectory) {
  auto f = SafetensorsFile::open("/nonexistent/model.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("cannot open /nonexistent/model.safetensors"),
            std::string::npos);
  const float x = 1;
  Status s = write_safetensors("/nonexistent/dir/out.safetensors", {{"x", DType::f32, {1}, &x}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create"), std::string::npos);
}

}  // namespace
}  // namespace lj
