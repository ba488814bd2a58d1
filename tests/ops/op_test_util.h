// Shared helpers of the tier-2 op tests: deterministic test data, running a small graph with the
// eager executor (twice, checking the two runs are bitwise equal), and comparing a result with a
// reference tensor under a stated tolerance.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graph/builder.h"
#include "reference.h"

namespace lj::test {

using ref::RefTensor;

// Uniform values in [lo, hi) from a splitmix64 stream (identical on every platform), rounded to
// what `dtype` stores, so the reference sees exactly the values the kernel sees.
RefTensor random_tensor(DType dtype, std::vector<int64_t> dims, uint64_t seed, double lo = -1.0,
                        double hi = 1.0);
// n floats in [-1, 1) from a 32-bit LCG (identical on every platform): raw operands for the
// kernel-level tests that call a kernel on plain arrays.
std::vector<float> lcg_floats(size_t n, uint32_t seed);
// Integer values in [lo, hi) (ids, labels, small-integer floats that compare equal).
RefTensor random_ints(DType dtype, std::vector<int64_t> dims, uint64_t seed, int64_t lo,
                      int64_t hi);
// A tensor holding `values` as given.
RefTensor make_tensor(DType dtype, std::vector<int64_t> dims, std::vector<double> values);
// A copy of x with every value rounded to `dtype` and tagged with it.
RefTensor rounded(const RefTensor& x, DType dtype);

struct GraphInput {
  std::string name;
  RefTensor value;  // fed as value.dtype with value.dims
};
// Adds the op(s) under test given the graph's inputs (in the order of GraphInput) and returns
// the values to fetch.
using BuildFn = std::function<std::vector<Val>(Builder& b, const std::vector<Val>& in)>;

struct RunOptions {
  int threads = 2;
  bool check_repeat = true;  // run twice and require bitwise-equal outputs
};

// Builds the graph (inputs declared with concrete shapes), runs it with the eager executor on a
// Device with `threads` threads and returns the outputs as RefTensors (dtype and dims from the
// kernel). A builder error or a kernel Status comes back as the Status.
StatusOr<std::vector<RefTensor>> run_graph(const std::vector<GraphInput>& inputs,
                                           const BuildFn& build, RunOptions options = {});

struct ErrorStats {
  double max_abs = 0.0;
  double max_rel = 0.0;  // |got - want| / max(|want|, 1e-30) over elements with |want| > atol
};

// Success when dtype and dims match and |got - want| <= atol + rtol * |want| everywhere (NaN
// matches NaN). The message lists the first mismatches with their multi-index.
::testing::AssertionResult all_close(const RefTensor& got, const RefTensor& want, double atol,
                                     double rtol, ErrorStats* stats = nullptr);

// EXPECTs all_close and reports the observed error under `what`.
void expect_close(const RefTensor& got, const RefTensor& want, double atol, double rtol,
                  const std::string& what);

// Prints "[observed] what: max_abs ... max_rel ..." when LJ_OPS_VERBOSE is set (used to write
// the tolerance comments).
void report(const std::string& what, const ErrorStats& stats);

// Picks the f32 or f64 value by dtype.
inline double by_dtype(DType dt, double f32_value, double f64_value) {
  return dt == DType::f32 ? f32_value : f64_value;
}

}  // namespace lj::test
