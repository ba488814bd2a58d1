// JSONL metric logs: lines round trip, append mode keeps earlier lines and drops a torn last
// line, and bad lines are a Status.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/jsonl.h"

namespace lj {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class JsonlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("lj_jsonl_" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    path_ = dir_ + "/metrics.jsonl";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(JsonlTest, LinesRoundTrip) {
  const std::vector<std::string> lines = {R"({"step":0,"loss":10.5})",
                                          R"({"step":1,"loss":9.25,"tag":"a\nb"})",
                                          R"({"step":2,"note":"ünïcödé"})"};
  {
    auto w = JsonlWriter::open(path_, /*append=*/false);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    for (const auto& l : lines) ASSERT_TRUE(w->write(l).ok());
    ASSERT_TRUE(w->flush().ok());
  }
  EXPECT_EQ(read_all(path_), lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n");
}

TEST_F(JsonlTest, TruncateModeStartsEmpty) {
  std::ofstream(path_) << "{\"old\":1}\n";
  auto w = JsonlWriter::open(path_, /*append=*/false);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->write(R"({"new":1})").ok());
  EXPECT_EQ(read_all(path_), "{\"new\":1}\n");
}

TEST_F(JsonlTest, AppendKeepsEarlierLines) {
  {
    auto w = JsonlWriter::open(path_, /*append=*/true);  // creates the file
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->write(R"({"step":0})").ok());
  }
  {
    auto w = JsonlWriter::open(path_, /*append=*/true);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->torn_tail_bytes(), 0u);
    ASSERT_TRUE(w->write(R"({"step":1})").ok());
    ASSERT_TRUE(w->flush().ok());
  }
  EXPECT_EQ(read_all(path_), "{\"step\":0}\n{\"step\":1}\n");
}

TEST_F(JsonlTest, AppendDropsATornLastLine) {
  std::ofstream(path_) << "{\"step\":0}\n{\"step\":1}\n{\"ste";  // a crash mid-line
  auto w = JsonlWriter::open(path_, /*append=*/true);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->torn_tail_bytes(), 5u);
  ASSERT_TRUE(w->write(R"({"step":2})").ok());
  EXPECT_EQ(read_all(path_), "{\"step\":0}\n{\"step\":1}\n{\"step\":2}\n");
}

TEST_F(JsonlTest, AppendToAFileWithNoCompleteLineEmptiesIt) {
  std::ofstream(path_) << "{\"half";
  auto w = JsonlWriter::open(path_, /*append=*/true);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->torn_tail_bytes(), 6u);
  ASSERT_TRUE(w->write(R"({"a":1})").ok());
  EXPECT_EQ(read_all(path_), "{\"a\":1}\n");
}

TEST_F(JsonlTest, AppendFindsTheLastNewlineAcrossReadBlocks) {
  // One complete line longer than the 64 KiB block the tail scan reads, then a torn line.
  const std::string long_line = "{\"x\":\"" + std::string(200 * 1024, 'a') + "\"}";
  std::ofstream(path_) << long_line << "\n" << std::string(100 * 1024, 'b');
  auto w = JsonlWriter::open(path_, /*append=*/true);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->torn_tail_bytes(), 100u * 1024u);
  EXPECT_EQ(read_all(path_), long_line + "\n");
}

TEST_F(JsonlTest, BadLinesAreAStatus) {
  auto w = JsonlWriter::open(path_, /*append=*/false);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->write("{\"a\":\n1}").ok());
  EXPECT_FALSE(w->write("").ok());
  EXPECT_EQ(read_all(path_), "");
}

TEST_F(JsonlTest, UnwritableDirectoryIsAStatus) {
  auto w = JsonlWriter::open(dir_ + "/missing/metrics.jsonl", /*append=*/true);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("cannot open"), std::string::npos) << w.status().to_string();
  auto d = JsonlWriter::open(dir_, /*append=*/true);  // a directory, not a file
  EXPECT_FALSE(d.ok());
}

}  // namespace
}  // namespace lj
