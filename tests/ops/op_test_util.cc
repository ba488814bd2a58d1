// Shared helpers of the tier-2 op tests; see op_test_util.h.
#include "op_test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/executor.h"
#include "runtime/tensor.h"

namespace lj::test {
namespace {

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double unit_double(uint64_t* state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
}

std::string index_string(int64_t flat, const std::vector<int64_t>& dims) {
  std::string s = "(";
  const std::vector<int64_t> idx = ref::unravel(flat, dims);
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + ")";
}

}  // namespace

RefTensor random_tensor(DType dtype, std::vector<int64_t> dims, uint64_t seed, double lo,
                        double hi) {
  RefTensor t = ref::zeros(dtype, std::move(dims));
  uint64_t state = seed * 0x2545f4914f6cdd1dull + 1;
  for (double& v : t.data) v = ref::round_to(dtype, lo + (hi - lo) * unit_double(&state));
  return t;
}

std::vector<float> lcg_floats(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

RefTensor random_ints(DType dtype, std::vector<int64_t> dims, uint64_t seed, int64_t lo,
                      int64_t hi) {
  RefTensor t = ref::zeros(dtype, std::move(dims));
  uint64_t state = seed * 0x2545f4914f6cdd1dull + 7;
  for (double& v : t.data) {
    v = static_cast<double>(
        lo + static_cast<int64_t>(splitmix64(&state) % static_cast<uint64_t>(hi - lo)));
  }
  return t;
}

RefTensor make_tensor(DType dtype, std::vector<int64_t> dims, std::vector<double> values) {
  RefTensor t{dtype, std::move(dims), std::move(values)};
  LJ_CHECK(static_cast<int64_t>(t.data.size()) == t.numel()) << "make_tensor: wrong value count";
  return t;
}

RefTensor rounded(const RefTensor& x, DType dtype) {
  return ref::cast(x, dtype);
}

StatusOr<std::vector<RefTensor>> run_graph(const std::vector<GraphInput>& inputs,
                                           const BuildFn& build, RunOptions options) {
  Graph g;
  Builder b(&g);
  std::vector<Val> in;
  for (const GraphInput& gi : inputs) {
    in.push_back(b.input(gi.name, gi.value.dtype, Shape::concrete(gi.value.dims)));
  }
  std::vector<Val> outs = build(b, in);
  if (!b.ok()) return b.status();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].valid()) return internal_error("run_graph: build returned an invalid value");
    b.output("out" + std::to_string(i), outs[i]);
  }
  LJ_RETURN_IF_ERROR(verify(g));

  Device dev(options.threads);
  std::vector<Tensor> feed;
  for (const GraphInput& gi : inputs) {
    feed.push_back(Tensor::from_doubles(dev, gi.value.dtype, gi.value.dims, gi.value.data));
  }
  Executor ex(g, dev);
  LJ_ASSIGN_OR_RETURN(std::vector<Tensor> first, ex.run(feed));
  if (options.check_repeat) {
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> second, ex.run(feed));
    for (size_t i = 0; i < first.size(); ++i) {
      // Determinism: same inputs and thread count must give bitwise-equal outputs.
      if (first[i].bytes() != second[i].bytes() ||
          std::memcmp(first[i].raw(), second[i].raw(), first[i].bytes()) != 0) {
        return internal_error("run_graph: output " + std::to_string(i) +
                              " differs bitwise between two runs with the same inputs and " +
                              std::to_string(options.threads) + " threads");
      }
    }
  }
  std::vector<RefTensor> result;
  for (const Tensor& t : first) result.push_back(RefTensor{t.dtype(), t.dims(), t.to_doubles()});
  return result;
}

::testing::AssertionResult all_close(const RefTensor& got, const RefTensor& want, double atol,
                                     double rtol, ErrorStats* stats) {
  if (got.dtype != want.dtype) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got.dtype) << ", expected " << dtype_name(want.dtype);
  }
  if (got.dims != want.dims) {
    return ::testing::AssertionFailure()
           << "dims " << dims_to_string(got.dims) << ", expected " << dims_to_string(want.dims);
  }
  ErrorStats s;
  int64_t bad = 0;
  std::ostringstream msg;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got[i];
    const double w = want[i];
    if (std::isnan(g) && std::isnan(w)) continue;
    if (g == w) continue;  // also equal infinities
    const double err = std::abs(g - w);
    const bool ok = err <= atol + rtol * std::abs(w);
    if (!std::isnan(err)) {
      s.max_abs = std::max(s.max_abs, err);
      if (std::abs(w) > atol) s.max_rel = std::max(s.max_rel, err / std::abs(w));
    }
    if (!ok) {
      if (bad < 8) {
        msg << "\n  at " << index_string(i, got.dims) << ": got " << g << ", expected " << w
            << " (|err| " << err << ")";
      }
      ++bad;
    }
  }
  if (stats != nullptr) *stats = s;
  if (bad > 0) {
    return ::testing::AssertionFailure()
           << bad << " of " << got.numel() << " elements differ beyond atol " << atol << " rtol "
           << rtol << " (max abs err " << s.max_abs << ", max rel err " << s.max_rel << ")"
           << msg.str();
  }
  return ::testing::AssertionSuccess();
}

void expect_close(const RefTensor& got, const RefTensor& want, double atol, double rtol,
                  const std::string& what) {
  ErrorStats stats;
  EXPECT_TRUE(all_close(got, want, atol, rtol, &stats)) << what;
  report(what, stats);
}

void report(const std::string& what, const ErrorStats& stats) {
  if (std::getenv("LJ_OPS_VERBOSE") == nullptr) return;
  std::printf("[observed] %s: max_abs %.3g max_rel %.3g\n", what.c_str(), stats.max_abs,
              stats.max_rel);
}

}  // namespace lj::test
