// TensorBoard event files: CRC-32C known answers, the TFRecord mask, and a reader written here
// from the format description (io/tensorboard.h) that checks the framing and both CRCs of every
// record, decodes the protobuf fields and compares them with what was written.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "io/tensorboard.h"

namespace lj {
namespace {

namespace fs = std::filesystem;

uint64_t load_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// One decoded Event (only the fields the writer uses).
struct DecodedValue {
  std::string tag;
  float simple_value = 0;
};
struct DecodedEvent {
  std::optional<double> wall_time;
  std::optional<int64_t> step;
  std::optional<std::string> file_version;
  std::vector<DecodedValue> values;
};

// A minimal protobuf reader: calls `on_field(field, wire_type, varint_or_fixed, bytes)`.
// Returns false on malformed input.
template <class F>
bool for_each_field(std::string_view msg, F on_field) {
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= msg.size()) return false;
      const auto b = static_cast<uint8_t>(msg[i++]);
      v |= uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (i < msg.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(key)) return false;
    const auto field = static_cast<uint32_t>(key >> 3);
    const auto type = static_cast<uint32_t>(key & 7);
    std::string_view bytes;
    if (type == 0) {
      if (!varint(v)) return false;
    } else if (type == 1 || type == 5) {
      const size_t n = type == 1 ? 8 : 4;
      if (i + n > msg.size()) return false;
      v = load_le(reinterpret_cast<const uint8_t*>(msg.data() + i), static_cast<int>(n));
      i += n;
    } else if (type == 2) {
      if (!varint(v) || v > msg.size() - i) return false;
      bytes = msg.substr(i, v);
      i += v;
    } else {
      return false;
    }
    if (!on_field(field, type, v, bytes)) return false;
  }
  return true;
}

bool decode_event(std::string_view data, DecodedEvent& ev) {
  return for_each_field(data, [&](uint32_t f, uint32_t t, uint64_t v, std::string_view b) {
    if (f == 1 && t == 1) {
      double d;
      std::memcpy(&d, &v, 8);
      ev.wall_time = d;
    } else if (f == 2 && t == 0) {
      ev.step = static_cast<int64_t>(v);
    } else if (f == 3 && t == 2) {
      ev.file_version = std::string(b);
    } else if (f == 5 && t == 2) {
      return for_each_field(b, [&](uint32_t sf, uint32_t st, uint64_t, std::string_view sb) {
        if (sf != 1 || st != 2) return false;
        DecodedValue dv;
        const bool ok =
            for_each_field(sb, [&](uint32_t vf, uint32_t vt, uint64_t vv, std::string_view vb) {
              if (vf == 1 && vt == 2) {
                dv.tag = std::string(vb);
              } else if (vf == 2 && vt == 5) {
                const auto bits = static_cast<uint32_t>(vv);
                std::memcpy(&dv.simple_value, &bits, 4);
              } else {
                return false;
              }
              return true;
            });
        ev.values.push_back(dv);
        return ok;
      });
    } else {
      return false;
    }
    return true;
  });
}

struct ReadResult {
  std::vector<DecodedEvent> events;
  bool truncated_tail = false;  // the file ends inside a record
  std::string error;            // a CRC or protobuf error (not a truncation)
};

// Reads records as TensorBoard does: stops at a truncated tail, checks both CRCs.
ReadResult read_events(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string img((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const uint8_t*>(img.data());
  ReadResult r;
  size_t i = 0;
  while (i < img.size()) {
    if (img.size() - i < 12) {
      r.truncated_tail = true;
      break;
    }
    const uint64_t len = load_le(p + i, 8);
    if (unmask_crc32c(static_cast<uint32_t>(load_le(p + i + 8, 4))) != crc32c(p + i, 8)) {
      r.error = "length CRC mismatch at byte " + std::to_string(i);
      break;
    }
    if (img.size() - i - 12 < len + 4) {
      r.truncated_tail = true;
      break;
    }
    const std::string_view data(img.data() + i + 12, len);
    if (load_le(p + i + 12 + len, 4) != masked_crc32c(data.data(), data.size())) {
      r.error = "data CRC mismatch at byte " + std::to_string(i);
      break;
    }
    DecodedEvent ev;
    if (!decode_event(data, ev)) {
      r.error = "bad protobuf at byte " + std::to_string(i);
      break;
    }
    r.events.push_back(ev);
    i += 12 + len + 4;
  }
  return r;
}

class TensorboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("lj_tb_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST(Crc32c, KnownAnswers) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  const std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  const std::vector<uint8_t> ones(32, 0xFF);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);  // RFC 3720 B.4
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

TEST(Crc32c, SlicedPathMatchesBytewiseOnEveryLengthAndOffset) {
  // A bit-at-a-time CRC as the reference for the slicing-by-8 loop and its byte tail.
  auto slow = [](const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? 0x82F63B78u : 0u);
    }
    return c ^ 0xFFFFFFFFu;
  };
  std::vector<uint8_t> buf(100);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t off = 0; off < 8; ++off) {
    for (size_t n = 0; n + off <= buf.size(); ++n) {
      ASSERT_EQ(crc32c(buf.data() + off, n), slow(buf.data() + off, n)) << off << " " << n;
    }
  }
}

TEST(Crc32c, MaskRoundTrips) {
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(mask_crc32c(c), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  for (uint32_t v : {0u, 1u, 0xFFFFFFFFu, 0x12345678u, c})
    EXPECT_EQ(unmask_crc32c(mask_crc32c(v)), v);
  EXPECT_EQ(masked_crc32c("123456789", 9), mask_crc32c(0xE3069283u));
}

TEST_F(TensorboardTest, WritesFileVersionThenScalars) {
  auto w = EventWriter::open(dir_ + "/nested/run");  // missing parents are created
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const std::string name = fs::path(w->path()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  ASSERT_TRUE(w->add_scalar("train/loss", 0, 10.5, 1700000000.25).ok());
  ASSERT_TRUE(w->add_scalar("train/loss", 1, 9.25, 1700000001.5).ok());
  ASSERT_TRUE(w->add_scalars(7, {{"lr", 3e-4}, {"tok_per_s", 123456.0}}, 1700000002.0).ok());
  ASSERT_TRUE(w->add_scalar("neg_step", -3, -1.0, 1.0).ok());
  ASSERT_TRUE(w->flush().ok());

  const ReadResult r = read_events(w->path());
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_FALSE(r.truncated_tail);
  ASSERT_EQ(r.events.size(), 5u);
  EXPECT_EQ(r.events[0].file_version, "brain.Event:2");
  ASSERT_TRUE(r.events[0].wall_time.has_value());
  EXPECT_NEAR(*r.events[0].wall_time, EventWriter::now_s(), 60.0);  // written moments ago
  EXPECT_TRUE(r.events[0].values.empty());

  EXPECT_EQ(r.events[1].step, 0);
  EXPECT_EQ(r.events[1].wall_time, 1700000000.25);  // a double round trips exactly
  ASSERT_EQ(r.events[1].values.size(), 1u);
  EXPECT_EQ(r.events[1].values[0].tag, "train/loss");
  EXPECT_EQ(r.events[1].values[0].simple_value, 10.5f);
  EXPECT_EQ(r.events[2].step, 1);
  EXPECT_EQ(r.events[2].values[0].simple_value, 9.25f);

  EXPECT_EQ(r.events[3].step, 7);
  ASSERT_EQ(r.events[3].values.size(), 2u);
  EXPECT_EQ(r.events[3].values[0].tag, "lr");
  EXPECT_EQ(r.events[3].values[0].simple_value, 3e-4f);  // stored as float, compared as float
  EXPECT_EQ(r.events[3].values[1].tag, "tok_per_s");
  EXPECT_EQ(r.events[3].values[1].simple_value, 123456.0f);
  EXPECT_EQ(r.events[4].step, -3);  // int64 varint, two's complement
}

TEST_F(TensorboardTest, TruncatedTailKeepsEarlierRecords) {
  auto w = EventWriter::open(dir_);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (int step = 0; step < 4; ++step) ASSERT_TRUE(w->add_scalar("x", step, step * 0.5).ok());
  ASSERT_TRUE(w->flush().ok());
  const std::string path = w->path();
  std::string img;
  {
    std::ifstream f(path, std::ios::binary);
    img.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(read_events(path).events.size(), 5u);  // file_version + steps 0..3
  size_t last_start = 0;
  for (size_t i = 0; i < img.size();) {
    last_start = i;
    i += 16 + load_le(reinterpret_cast<const uint8_t*>(img.data()) + i, 8);
  }
  // Cut inside the last record at every point: its header, data and trailing CRC.
  for (size_t cut = last_start + 1; cut < img.size(); ++cut) {
    const std::string tpath = dir_ + "/events.out.tfevents.truncated";
    {
      std::ofstream f(tpath, std::ios::binary | std::ios::trunc);
      f.write(img.data(), static_cast<std::streamsize>(cut));
    }
    const ReadResult r = read_events(tpath);
    ASSERT_TRUE(r.error.empty()) << "cut at " << cut << ": " << r.error;
    EXPECT_TRUE(r.truncated_tail) << cut;
    ASSERT_EQ(r.events.size(), 4u) << cut;  // file_version + steps 0..2
    EXPECT_EQ(r.events[3].step, 2);
  }
}

TEST_F(TensorboardTest, SecondWriterInTheSameSecondGetsAnotherFile) {
  auto a = EventWriter::open(dir_);
  auto b = EventWriter::open(dir_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path(), b->path());
}

TEST_F(TensorboardTest, DirectoryThatIsAFileIsAStatus) {
  fs::create_directories(dir_);
  const std::string file = dir_ + "/plain";
  std::ofstream(file) << "x";
  auto w = EventWriter::open(file);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("not a directory"), std::string::npos)
      << w.status().to_string();
  auto w2 = EventWriter::open(file + "/sub");  // a parent is a file: cannot be created
  ASSERT_FALSE(w2.ok());
  EXPECT_NE(w2.status().message().find("cannot create the event directory"), std::string::npos)
      << w2.status().to_string();
}

TEST_F(TensorboardTest, EmptyTagIsAStatus) {
  auto w = EventWriter::open(dir_);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->add_scalar("", 0, 1.0).ok());
}

}  // namespace
}  // namespace lj
