// core/json_read.h: the checked JSON reader. Every wrong type, missing value or value out of
// range is an error that names the file and the key; nothing throws.
#include "core/json_read.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace lj {
namespace {

bool has(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

const Json kDoc = Json::parse(R"({
  "name": "x", "flag": true, "n": 7, "neg": -3, "big": 9223372036854775808, "real": 2.5,
  "whole_real": 3.0, "list": [1, 2.5, "three"], "nums": [1, 2.5], "obj": {"k": 5},
  "nothing": null})");

TEST(JsonRead, ReadsEachType) {
  const JsonWhere at{"f.json"};
  EXPECT_EQ(*json_read<std::string>(json_member(kDoc, "name"), at / "name"), "x");
  EXPECT_TRUE(*json_read<bool>(json_member(kDoc, "flag"), at / "flag"));
  EXPECT_EQ(*json_read<int64_t>(json_member(kDoc, "n"), at / "n"), 7);
  EXPECT_EQ(*json_read<int>(json_member(kDoc, "neg"), at / "neg"), -3);
  EXPECT_EQ(*json_read<uint64_t>(json_member(kDoc, "big"), at / "big"), uint64_t{1} << 63);
  EXPECT_EQ(*json_read<double>(json_member(kDoc, "real"), at / "real"), 2.5);
  EXPECT_EQ(*json_read<double>(json_member(kDoc, "n"), at / "n"), 7.0);  // an integer is a number
  EXPECT_EQ(*json_read<std::vector<double>>(json_member(kDoc, "nums"), at / "nums"),
            (std::vector<double>{1, 2.5}));
  EXPECT_EQ(*json_read<int>(json_member(json_member(kDoc, "obj"), "k"), at / "obj" / "k"), 5);
}

TEST(JsonRead, WrongTypeNamesTheFileAndTheKey) {
  const JsonWhere at{"tokenizer.json", "post_processor", "a hint"};
  auto s = json_read<std::string>(json_member(kDoc, "n"), at / "single" / "id");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "tokenizer.json: post_processor.single.id must be a string, got 7");
  EXPECT_EQ(s.status().hint(), "a hint");
  EXPECT_EQ(s.status().code(), StatusCode::invalid_argument);
  auto b = json_read<bool>(json_member(kDoc, "name"), JsonWhere{"f.json"} / "name");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "f.json: name must be true or false, got \"x\"");
  // An integer key holding a float is an error, never a conversion.
  auto i = json_read<int64_t>(json_member(kDoc, "whole_real"), JsonWhere{"f.json"} / "whole_real");
  ASSERT_FALSE(i.ok());
  EXPECT_TRUE(has(i.status(), "f.json: whole_real must be a 64-bit integer, got 3.0"))
      << i.status().message();
  // The element of a list is named by its index.
  auto v = json_read<std::vector<double>>(json_member(kDoc, "list"), JsonWhere{"f.json"} / "list");
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(has(v.status(), "f.json: list[2] must be a number, got \"three\""))
      << v.status().message();
  EXPECT_FALSE(json_need_object(json_member(kDoc, "list"), JsonWhere{"f.json"}).ok());
  EXPECT_TRUE(json_need_array(json_member(kDoc, "list"), JsonWhere{"f.json"}).ok());
}

TEST(JsonRead, MissingAndNullAreMissing) {
  const JsonWhere at{"f.json"};
  for (const char* key : {"absent", "nothing"}) {
    auto r = json_read<double>(json_member(kDoc, key), at / key);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), std::string("f.json: ") + key + " is missing");
    EXPECT_EQ(*json_read_or<double>(json_member(kDoc, key), 4.5, at / key), 4.5);
  }
  // The fallback is for a missing value only: one of another type is still an error.
  EXPECT_FALSE(json_read_or<std::string>(json_member(kDoc, "n"), "", at / "n").ok());
  // A member of something that is not an object is missing, not an exception.
  EXPECT_TRUE(json_member(json_member(kDoc, "list"), "k").is_null());
  EXPECT_TRUE(json_member(Json(5), "k").is_null());
}

TEST(JsonRead, RangesAreChecked) {
  const JsonWhere at{"f.json"};
  EXPECT_EQ(*json_read_in<int64_t>(json_member(kDoc, "n"), at / "n", 0, 7), 7);
  auto r = json_read_in<int64_t>(json_member(kDoc, "n"), at / "n", 0, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "f.json: n must be in [0, 3], got 7");
  auto d = json_read_in<double>(json_member(kDoc, "real"), at / "real", 0.0, 1.0);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(has(d.status(), "f.json: real must be in [0.0, 1.0], got 2.5"))
      << d.status().message();
  // 2^63 does not fit int64, -3 does not fit uint64: out of range, not wrapped.
  auto big = json_read<int64_t>(json_member(kDoc, "big"), at / "big");
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(has(big.status(), "f.json: big is out of range")) << big.status().message();
  EXPECT_FALSE(json_read<uint64_t>(json_member(kDoc, "neg"), at / "neg").ok());
  EXPECT_FALSE(json_read<uint32_t>(Json(uint64_t{1} << 32), at).ok());
  EXPECT_FALSE(json_read<int>(Json(int64_t{1} << 31), at).ok());
  EXPECT_EQ(*json_read<int>(Json(std::numeric_limits<int>::min()), at),
            std::numeric_limits<int>::min());
}

TEST(JsonRead, PeeksNeverThrow) {
  EXPECT_EQ(*json_string_if(json_member(kDoc, "name")), "x");
  EXPECT_EQ(json_string_if(json_member(kDoc, "n")), nullptr);
  EXPECT_EQ(json_bool_if(json_member(kDoc, "flag")), true);
  EXPECT_FALSE(json_bool_if(json_member(kDoc, "name")).has_value());
  EXPECT_EQ(json_number_if(json_member(kDoc, "n")), 7.0);
  EXPECT_FALSE(json_number_if(json_member(kDoc, "name")).has_value());
  EXPECT_EQ(json_int_if(json_member(kDoc, "neg")), -3);
  EXPECT_FALSE(json_int_if(json_member(kDoc, "big")).has_value());
  EXPECT_FALSE(json_int_if(json_member(kDoc, "real")).has_value());
  EXPECT_EQ(json_uint_if(json_member(kDoc, "big")), uint64_t{1} << 63);
  EXPECT_FALSE(json_uint_if(json_member(kDoc, "neg")).has_value());
}

}  // namespace
}  // namespace lj
