// Tier 1: core types — dtypes, symbolic shapes, Status, units.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "core/random.h"
#include "core/shape.h"
#include "core/status.h"
#include "core/units.h"

namespace lj {
namespace {

TEST(DType, TableAndParsing) {
  EXPECT_EQ(dtype_size(DType::f32), 4);
  EXPECT_EQ(dtype_size(DType::bf16), 2);
  EXPECT_EQ(dtype_size(DType::i64), 8);
  EXPECT_EQ(dtype_size(DType::u8), 1);
  DType t;
  EXPECT_TRUE(parse_dtype("bfloat16", &t));
  EXPECT_EQ(t, DType::bf16);
  EXPECT_TRUE(parse_dtype("f64", &t));
  EXPECT_EQ(t, DType::f64);
  EXPECT_FALSE(parse_dtype("float8", &t));
  EXPECT_FALSE(is_float(DType::i32));
}

TEST(DType, HalfConversionsRoundTrip) {
  // bf16 keeps 8 mantissa bits; round to nearest even.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-3.5f)), -3.5f);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // halfway between 1 and 1+2^-7: rounds to even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
}

TEST(Shape, SymbolicDims) {
  const Dim B = Dim::sym('B'), T = Dim::sym('T');
  Shape s{B, T, 288};
  EXPECT_EQ(s.to_string(), "(B, T, 288)");
  EXPECT_FALSE(s.is_concrete());
  EXPECT_EQ(s.numel().to_string(), "288*B*T");
  Dim q;
  ASSERT_TRUE(s.numel().divide(Dim(288), &q));
  EXPECT_EQ(q, B * T);
  EXPECT_FALSE(s.numel().divide(Dim(7), &q));
  EXPECT_FALSE(Dim(288).divide(T, &q));
  std::vector<int64_t> dims;
  EXPECT_FALSE(s.eval(SymEnv{{'B', 4}}, &dims));  // T unbound
  ASSERT_TRUE(s.eval(SymEnv{{'B', 4}, {'T', 256}}, &dims));
  EXPECT_EQ(dims, (std::vector<int64_t>{4, 256, 288}));
  EXPECT_EQ((B * T).eval(SymEnv{{'B', 4}, {'T', 256}}), 1024);
  EXPECT_EQ(B * T, T * B);
}

TEST(Status, MessagesAndMacros) {
  Status s = invalid_argument("bad thing", "do this");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "bad thing (hint: do this)");
  EXPECT_EQ(s.with_context("loading x").message(), "loading x: bad thing");
  auto f = [](bool fail) -> StatusOr<int> {
    if (fail) return not_found("nope");
    return 7;
  };
  auto g = [&](bool fail) -> Status {
    LJ_ASSIGN_OR_RETURN(int v, f(fail));
    return v == 7 ? ok_status() : internal_error("wrong");
  };
  EXPECT_TRUE(g(false).ok());
  EXPECT_EQ(g(true).code(), StatusCode::not_found);
}

TEST(Units, Formatting) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3.5 * 1024 * 1024), "3.50 MiB");
  EXPECT_EQ(format_bytes(15.0 * 1024 * 1024 * 1024), "15.0 GiB");
  EXPECT_EQ(format_seconds(0.0123), "12.3 ms");
  EXPECT_EQ(format_seconds(125), "2 min 05 s");
}

TEST(Units, ParseBytes) {
  EXPECT_EQ(*parse_bytes("20GiB"), 20.0 * (1 << 30));
  EXPECT_EQ(*parse_bytes("512 MiB"), 512.0 * (1 << 20));
  EXPECT_EQ(*parse_bytes("143771 MiB"), 143771.0 * (1 << 20));  // nvidia-smi's memory.total
  EXPECT_EQ(*parse_bytes("1.5GB"), 1.5e9);
  EXPECT_EQ(*parse_bytes("1000"), 1000.0);
  EXPECT_FALSE(parse_bytes("lots").ok());
  EXPECT_FALSE(parse_bytes("20XB").ok());
  EXPECT_FALSE(parse_bytes("-3GiB").ok());
  EXPECT_FALSE(parse_bytes("0").ok());
}

TEST(Random, CounterBasedAndStandardNormal) {
  EXPECT_EQ(random_bits(1, 5), random_bits(1, 5));
  EXPECT_NE(random_bits(1, 5), random_bits(2, 5));
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = random_normal01(42, static_cast<uint64_t>(i));
    sum += x;
    sq += x * x;
  }
  // Sample mean and variance of 2e5 normals: standard errors 0.0022 and 0.0032.
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.015);
}

}  // namespace
}  // namespace lj
