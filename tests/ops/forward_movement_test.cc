// Tier-2 forward tests of the data-movement ops (reshape, permute, slice, concat, expand, gather,
// scatter_add) against the reference kernels, in f32 and f64, and of gather's data errors.
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;

constexpr DType kFloatTypes[] = {DType::f32, DType::f64};

TEST(Forward, Reshape) {
  struct Case {
    Dims in;
    Shape to;  // may hold Dim(-1)
    Dims want;
  };
  const std::vector<Case> cases = {
      {{3, 4, 5}, Shape{12, 5}, {12, 5}},  {{3, 4, 5}, Shape{Dim(-1), 10}, {6, 10}},
      {{3, 4, 5}, Shape{60}, {60}},        {{37}, Shape{1, 37, 1}, {1, 37, 1}},
      {{2, 3}, Shape{3, Dim(-1)}, {3, 2}},
  };
  uint64_t seed = 1;
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      const RefTensor x = random_tensor(dt, c.in, seed++);
      auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{reshape(in[0], c.to)};
      });
      const std::string what = std::string("reshape ") + dtype_name(dt) + dims_to_string(c.in) +
                               " -> " + c.to.to_string();
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      expect_close((*r)[0], ref::reshape(x, c.want), 0.0, 0.0, what);  // exact: a copy
    }
  }
}

TEST(Forward, Permute) {
  struct Case {
    Dims in;
    std::vector<int64_t> perm;
  };
  const std::vector<Case> cases = {
      {{37, 65}, {1, 0}},     {{2, 3, 4, 5}, {0, 2, 1, 3}}, {{2, 3, 4, 5}, {3, 2, 1, 0}},
      {{2, 3, 4}, {1, 2, 0}}, {{2, 3, 4}, {0, 1, 2}},       {{5, 1, 7}, {2, 0, 1}},
  };
  uint64_t seed = 100;
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      const RefTensor x = random_tensor(dt, c.in, seed++);
      auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{permute(in[0], c.perm)};
      });
      const std::string what = std::string("permute ") + dtype_name(dt) + dims_to_string(c.in) +
                               " perm " + dims_to_string(c.perm);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      expect_close((*r)[0], ref::permute(x, c.perm), 0.0, 0.0, what);  // exact: a copy
    }
  }
}

TEST(Forward, Slice) {
  struct Case {
    Dims in;
    int axis;
    int64_t start, end;
  };
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  const std::vector<Case> cases = {
      {{5, 37, 3}, 1, 3, 20}, {{5, 37, 3}, 0, 0, 5}, {{5, 37, 3}, 2, 1, kEnd},
      {{5, 37, 3}, 0, 4, 5},  {{5, 37, 3}, 1, 0, 1}, {{37}, 0, 10, 100},
  };
  uint64_t seed = 200;
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      const RefTensor x = random_tensor(dt, c.in, seed++);
      auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{slice(in[0], c.axis, c.start, c.end)};
      });
      const std::string what = std::string("slice ") + dtype_name(dt) + dims_to_string(c.in) +
                               " axis " + std::to_string(c.axis) + " [" + std::to_string(c.start) +
                               ", " + std::to_string(c.end) + ")";
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      expect_close((*r)[0], ref::slice(x, c.axis, c.start, c.end), 0.0, 0.0, what);  // exact
    }
  }
}

TEST(Forward, Concat) {
  struct Case {
    std::vector<Dims> in;
    int axis;
  };
  const std::vector<Case> cases = {
      {{{2, 3, 4}, {2, 5, 4}, {2, 1, 4}}, 1},
      {{{2, 3, 4}, {1, 3, 4}}, 0},
      {{{2, 3, 4}, {2, 3, 7}, {2, 3, 1}}, 2},
      {{{37}}, 0},
      {{{3, 37}, {3, 29}}, 1},
  };
  uint64_t seed = 300;
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      std::vector<GraphInput> inputs;
      std::vector<RefTensor> xs;
      for (size_t i = 0; i < c.in.size(); ++i) {
        xs.push_back(random_tensor(dt, c.in[i], seed++));
        inputs.push_back({"x" + std::to_string(i), xs.back()});
      }
      auto r = run_graph(inputs, [&](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{concat(in, c.axis)};
      });
      const std::string what = std::string("concat ") + dtype_name(dt) + " of " +
                               std::to_string(c.in.size()) + " axis " + std::to_string(c.axis);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      expect_close((*r)[0], ref::concat(xs, c.axis), 0.0, 0.0, what);  // exact: a copy
    }
  }
}

TEST(Forward, Expand) {
  struct Case {
    Dims in, to;
  };
  const std::vector<Case> cases = {
      {{3, 1}, {2, 3, 4}},    {{1}, {5}},        {{4}, {3, 4}},
      {{2, 1, 3}, {2, 5, 3}}, {{1, 1}, {37, 3}}, {{3, 4}, {3, 4}},
  };
  uint64_t seed = 400;
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      const RefTensor x = random_tensor(dt, c.in, seed++);
      auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{expand(in[0], Shape::concrete(c.to))};
      });
      const std::string what = std::string("expand ") + dtype_name(dt) + dims_to_string(c.in) +
                               " -> " + dims_to_string(c.to);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      expect_close((*r)[0], ref::expand(x, c.to), 0.0, 0.0, what);  // exact: a copy
    }
  }
}

struct IndexCase {
  Dims table;  // (V, C...)
  Dims ids;    // (N...)
  DType id_dtype;
  int64_t id_hi;  // ids drawn from [0, id_hi): small id_hi repeats ids
};

const std::vector<IndexCase>& index_cases() {
  static const std::vector<IndexCase> kCases = {
      {{10, 4}, {3, 5}, DType::i32, 10},
      {{7, 2, 3}, {6}, DType::i64, 7},
      {{9}, {4}, DType::i32, 9},
      {{37, 65}, {2, 37}, DType::i64, 3},
  };
  return kCases;
}

TEST(Forward, Gather) {
  uint64_t seed = 500;
  for (DType dt : kFloatTypes) {
    for (const IndexCase& c : index_cases()) {
      const RefTensor table = random_tensor(dt, c.table, seed++);
      const RefTensor ids = random_ints(c.id_dtype, c.ids, seed++, 0, c.id_hi);
      auto r =
          run_graph({{"table", table}, {"ids", ids}}, [&](Builder&, const std::vector<Val>& in) {
            return std::vector<Val>{gather(in[0], in[1])};
          });
      const std::string what = std::string("gather ") + dtype_name(dt) + dims_to_string(c.table) +
                               " ids " + dtype_name(c.id_dtype) + dims_to_string(c.ids);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      expect_close((*r)[0], ref::gather(table, ids), 0.0, 0.0, what);  // exact: a copy
    }
  }
}

TEST(Forward, ScatterAdd) {
  uint64_t seed = 600;
  for (DType dt : kFloatTypes) {
    for (const IndexCase& c : index_cases()) {
      const RefTensor ids = random_ints(c.id_dtype, c.ids, seed++, 0, c.id_hi);
      Dims src_dims = c.ids;
      src_dims.insert(src_dims.end(), c.table.begin() + 1, c.table.end());
      const RefTensor src = random_tensor(dt, src_dims, seed++);
      auto r = run_graph({{"ids", ids}, {"src", src}}, [&](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{scatter_add(in[0], in[1], Shape::concrete(c.table))};
      });
      const std::string what = std::string("scatter_add ") + dtype_name(dt) +
                               dims_to_string(src_dims) + " -> " + dims_to_string(c.table);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      // The reference adds in the same order (increasing n) in f64: f64 must match to the last
      // bit up to the order of the zero start (observed exact); f32 rounds each of at most
      // 74/3 ~ 25 additions of values in [-1, 1]: 25 * 6e-8 * 25 < 1e-4 worst case, atol 1e-5
      // is ample for the typical sqrt growth. Observed: f32 abs 1.2e-6, f64 exact.
      expect_close((*r)[0], rounded(ref::scatter_add(ids, src, c.table), dt),
                   by_dtype(dt, 1e-5, 1e-15), by_dtype(dt, 1e-6, 1e-15), what);
    }
  }
}

// A token id past the vocabulary is a data error: a Status naming the id, not a crash.
TEST(Forward, GatherIdOutOfRangeIsAStatus) {
  for (DType id_dtype : {DType::i32, DType::i64}) {
    for (double bad : {10.0, -1.0, 1000000.0}) {
      const RefTensor table = random_tensor(DType::f32, {10, 4}, 700);
      RefTensor ids = random_ints(id_dtype, {2, 3}, 701, 0, 10);
      ids[4] = bad;
      auto r =
          run_graph({{"table", table}, {"ids", ids}}, [&](Builder&, const std::vector<Val>& in) {
            return std::vector<Val>{gather(in[0], in[1])};
          });
      ASSERT_FALSE(r.ok()) << "gather accepted id " << bad << " for a table of 10 rows";
      EXPECT_EQ(r.status().code(), StatusCode::out_of_range) << r.status().to_string();
      EXPECT_NE(r.status().message().find(std::to_string(static_cast<int64_t>(bad))),
                std::string::npos)
          << "the message should name the id: " << r.status().to_string();
    }
  }
}

}  // namespace
}  // namespace lj::test
