// Tier-2 forward tests of cross_entropy, cross_entropy_backward, sdpa and sdpa_backward against
// the reference kernels, in f32 and f64, plus cross_entropy's data errors.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;

struct CeCase {
  int64_t n, v;
  DType label_dtype;
  int64_t ignore_index;
  double range;         // logits in [-range, range]
  int64_t num_ignored;  // rows whose label is set to ignore_index
};

const std::vector<CeCase>& ce_cases() {
  static const std::vector<CeCase> kCases = {
      {37, 11, DType::i32, -100, 3, 5}, {4, 1001, DType::i64, -1, 20, 1},
      {5, 7, DType::i32, 3, 3, 0},      {1, 2, DType::i64, -100, 3, 0},
      {6, 65, DType::i64, -100, 3, 6},  // every row ignored: NaN
  };
  return kCases;
}

RefTensor ce_labels(const CeCase& c, uint64_t seed) {
  RefTensor labels = random_ints(c.label_dtype, {c.n}, seed, 0, c.v);
  for (int64_t i = 0; i < c.num_ignored; ++i)
    labels[(i * 7) % c.n] = static_cast<double>(c.ignore_index);
  return labels;
}

std::string ce_name(const char* op, DType dt, const CeCase& c) {
  return std::string(op) + " " + dtype_name(dt) + " N=" + std::to_string(c.n) +
         " V=" + std::to_string(c.v) + " ignore_index=" + std::to_string(c.ignore_index);
}

TEST(Forward, CrossEntropy) {
  uint64_t seed = 1;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const CeCase& c : ce_cases()) {
      const RefTensor logits = random_tensor(dt, {c.n, c.v}, seed++, -c.range, c.range);
      const RefTensor labels = ce_labels(c, seed++);
      auto r = run_graph({{"logits", logits}, {"labels", labels}},
                         [&](Builder&, const std::vector<Val>& in) {
                           return std::vector<Val>{cross_entropy(in[0], in[1], c.ignore_index)};
                         });
      const std::string what = ce_name("cross_entropy", dt, c);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      // The loss is a mean of logsumexp - logit, O(log V + range) <= 30: f32 relative error
      // of a sum of up to 1001 exps plus a log, about 1e-6; rtol 1e-5. f64: 1e-13.
      // Observed: f32 abs 2.4e-7 (rel 9e-8), f64 abs 3.6e-15.
      expect_close((*r)[0], rounded(ref::cross_entropy(logits, labels, c.ignore_index), dt),
                   by_dtype(dt, 1e-6, 1e-14), by_dtype(dt, 1e-5, 1e-13), what);
    }
  }
}

TEST(Forward, CrossEntropyBackward) {
  uint64_t seed = 100;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const CeCase& c : ce_cases()) {
      const RefTensor logits = random_tensor(dt, {c.n, c.v}, seed++, -c.range, c.range);
      const RefTensor labels = ce_labels(c, seed++);
      const RefTensor dloss = make_tensor(dt, {}, {ref::round_to(dt, 1.7)});
      auto r = run_graph({{"logits", logits}, {"labels", labels}, {"dloss", dloss}},
                         [&](Builder& b, const std::vector<Val>& in) {
                           return std::vector<Val>{b.add1(Op::cross_entropy_backward, in,
                                                          {{"ignore_index", c.ignore_index}})};
                         });
      const std::string what = ce_name("cross_entropy_backward", dt, c);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      // Entries are (p - onehot) * 1.7 / num_valid, magnitudes <= 1.7: softmax's f32 error
      // (Forward.SoftmaxAndLogSoftmax, 1e-6 absolute) times 1.7; f64 1e-14. Observed: f32 abs
      // 3e-8, f64 abs 2.2e-16.
      expect_close((*r)[0],
                   rounded(ref::cross_entropy_backward(logits, labels, dloss, c.ignore_index), dt),
                   by_dtype(dt, 2e-6, 1e-14), by_dtype(dt, 1e-5, 1e-12), what);
    }
  }
}

// A label outside [0, V) that is not ignore_index is a data error: a Status, not a crash.
TEST(Forward, CrossEntropyLabelOutOfRangeIsAStatus) {
  for (double bad : {11.0, -5.0}) {
    for (DType label_dtype : {DType::i32, DType::i64}) {
      const RefTensor logits = random_tensor(DType::f32, {6, 11}, 200);
      RefTensor labels = random_ints(label_dtype, {6}, 201, 0, 11);
      labels[3] = bad;
      auto r = run_graph({{"logits", logits}, {"labels", labels}},
                         [&](Builder&, const std::vector<Val>& in) {
                           return std::vector<Val>{cross_entropy(in[0], in[1], -100)};
                         });
      ASSERT_FALSE(r.ok()) << "cross_entropy accepted label " << bad << " with V = 11";
      EXPECT_EQ(r.status().code(), StatusCode::out_of_range) << r.status().to_string();
      EXPECT_NE(r.status().message().find(std::to_string(static_cast<int64_t>(bad))),
                std::string::npos)
          << "the message should name the label: " << r.status().to_string();
    }
  }
}

struct SdpaCase {
  int64_t b, h, g, tq, tk, d;
  bool causal;
  double scale;        // <= 0: 1/sqrt(D)
  double range;        // inputs in [-range, range]
  int64_t window = 0;  // > 0: query i sees keys i - window < j <= i (Mistral's sliding window)
};

const std::vector<SdpaCase>& sdpa_cases() {
  static const std::vector<SdpaCase> kCases = {
      {1, 1, 1, 1, 1, 4, true, 0, 1},
      {2, 4, 2, 37, 37, 16, true, 0, 1},
      {2, 4, 2, 37, 37, 16, false, 0, 1},
      {1, 4, 1, 70, 70, 8, true, 0, 1},
      {1, 2, 2, 5, 9, 8, false, 0.3, 1},
      {1, 3, 3, 65, 65, 64, true, 0, 1},
      {1, 2, 1, 33, 33, 16, true, 0, 4},
      {2, 2, 2, 129, 129, 8, false, 0, 1},
      // D = 48 (`small`'s heads: one 3-vector panel on 16 lanes) and D = 40 (a vector tail).
      {1, 6, 2, 130, 130, 48, true, 0, 1},
      {1, 2, 1, 70, 70, 40, false, 0, 2},
      // Sliding windows: inside one tile, of one key (only the query's own), across tiles (70 >
      // the 64-key tile, so a query tile starts in the middle of a key tile), one tile exactly,
      // and wider than T (plain causal).
      {2, 4, 2, 37, 37, 16, true, 0, 1, 5},
      {1, 2, 2, 20, 20, 8, true, 0, 1, 1},
      {1, 2, 1, 150, 150, 48, true, 0, 1, 70},
      {1, 3, 3, 130, 130, 16, true, 0, 2, 64},
      {1, 2, 1, 33, 33, 16, true, 0, 1, 40},
  };
  return kCases;
}

std::string sdpa_name(const char* op, DType dt, const SdpaCase& c) {
  char buf[180];
  std::snprintf(buf, sizeof buf,
                "%s %s B=%lld H=%lld G=%lld Tq=%lld Tk=%lld D=%lld causal=%d scale=%g window=%lld",
                op, dtype_name(dt), static_cast<long long>(c.b), static_cast<long long>(c.h),
                static_cast<long long>(c.g), static_cast<long long>(c.tq),
                static_cast<long long>(c.tk), static_cast<long long>(c.d), c.causal ? 1 : 0,
                c.scale, static_cast<long long>(c.window));
  return buf;
}

TEST(Forward, Sdpa) {
  uint64_t seed = 300;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const SdpaCase& c : sdpa_cases()) {
      const RefTensor q = random_tensor(dt, {c.b, c.h, c.tq, c.d}, seed++, -c.range, c.range);
      const RefTensor k = random_tensor(dt, {c.b, c.g, c.tk, c.d}, seed++, -c.range, c.range);
      const RefTensor v = random_tensor(dt, {c.b, c.g, c.tk, c.d}, seed++, -c.range, c.range);
      auto r = run_graph({{"q", q}, {"k", k}, {"v", v}}, [&](Builder&, const std::vector<Val>& in) {
        const SdpaResult s = sdpa(in[0], in[1], in[2], c.causal, c.scale, c.window);
        return std::vector<Val>{s.out, s.lse};
      });
      const std::string what = sdpa_name("sdpa", dt, c);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      const ref::SdpaOut want = ref::sdpa(q, k, v, c.causal, c.scale, c.window);
      // out is a convex combination of v entries (|v| <= range): f32 error of the online
      // softmax and the weighted sum, about 1e-6 * range; atol 1e-5 * range. lse is
      // O(log Tk + scores): atol 1e-5 * range. f64: 1e-13 likewise. Observed: f32 abs 2.9e-6
      // at range 4, <= 4.8e-7 at range 1; f64 abs 4.4e-15.
      const double atol = by_dtype(dt, 1e-5, 1e-13) * c.range;
      expect_close((*r)[0], rounded(want.out, dt), atol, by_dtype(dt, 1e-5, 1e-12), what + " out");
      expect_close((*r)[1], rounded(want.lse, dt), atol, by_dtype(dt, 1e-5, 1e-12), what + " lse");
    }
  }
}

TEST(Forward, SdpaBackward) {
  uint64_t seed = 400;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const SdpaCase& c : sdpa_cases()) {
      const RefTensor q = random_tensor(dt, {c.b, c.h, c.tq, c.d}, seed++, -c.range, c.range);
      const RefTensor k = random_tensor(dt, {c.b, c.g, c.tk, c.d}, seed++, -c.range, c.range);
      const RefTensor v = random_tensor(dt, {c.b, c.g, c.tk, c.d}, seed++, -c.range, c.range);
      const RefTensor dout = random_tensor(dt, {c.b, c.h, c.tq, c.d}, seed++);
      const ref::SdpaOut fwd = ref::sdpa(q, k, v, c.causal, c.scale, c.window);
      const RefTensor out = rounded(fwd.out, dt);
      const RefTensor lse = rounded(fwd.lse, dt);
      auto r = run_graph({{"q", q}, {"k", k}, {"v", v}, {"out", out}, {"lse", lse}, {"dout", dout}},
                         [&](Builder& b, const std::vector<Val>& in) {
                           Attrs attrs{{"causal", c.causal}, {"scale", c.scale}};
                           if (c.window > 0) attrs.set("window", c.window);
                           return b.add(Op::sdpa_backward, in, attrs);
                         });
      const std::string what = sdpa_name("sdpa_backward", dt, c);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      ASSERT_EQ(r->size(), 3u);
      const ref::SdpaGrads want = ref::sdpa_backward(q, k, v, dout, c.causal, c.scale, c.window);
      // Gradients sum up to Tk (dq) or H/G * Tq (dk, dv) terms of size <= range^2: f32 atol
      // 1e-5 * range^2 * sqrt(terms) is conservative (observed errors printed with
      // LJ_OPS_VERBOSE). f64 1e-12 likewise. Observed: f32 abs 3.3e-6 at range 4 (bound
      // 2.3e-4), <= 6e-7 at range 1 (bound >= 6e-5); f64 abs 3.3e-15.
      const double terms = static_cast<double>(std::max(c.tk, c.tq * (c.h / c.g)));
      const double atol = by_dtype(dt, 1e-5, 1e-12) * c.range * c.range * std::sqrt(terms);
      expect_close((*r)[0], rounded(want.dq, dt), atol, by_dtype(dt, 1e-4, 1e-10), what + " dq");
      expect_close((*r)[1], rounded(want.dk, dt), atol, by_dtype(dt, 1e-4, 1e-10), what + " dk");
      expect_close((*r)[2], rounded(want.dv, dt), atol, by_dtype(dt, 1e-4, 1e-10), what + " dv");
    }
  }
}

}  // namespace
}  // namespace lj::test
