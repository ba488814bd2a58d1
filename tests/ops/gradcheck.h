// The finite-difference gradient check of the tier-2 tests. A case is an op (or a small subgraph)
// applied to f64 inputs. The harness builds
//     loss = sum_k sum(out_k * r_k)
// with a fixed random r_k (an f64 data input) per output, gets the analytic gradient of every
// differentiable input from append_gradients run by the eager executor, and compares it with the
// central difference (loss(x + h e_i) - loss(x - h e_i)) / 2h on every element, or on a
// deterministic sample of 64 elements for bigger inputs.
//
// Error of one element: |analytic - fd| / max(|analytic|, |fd|, 1e-3). The floor keeps
// near-zero gradients (where the difference quotient is all rounding noise, about
// 1e-16 * |loss| / h) from reporting huge relative errors.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "reference.h"

namespace lj::test {

struct GradInput {
  std::string name;
  ref::RefTensor value;        // fed as value.dtype
  bool differentiable = true;  // false: ids, labels, conditions (not differentiated)
};

// Adds the op(s) under test given the inputs (in GradInput order); returns the outputs that
// enter the loss (float values).
using GradBuildFn = std::function<std::vector<Val>(Builder& b, const std::vector<Val>& in)>;

struct GradCase {
  std::string name;
  std::vector<GradInput> inputs;
  GradBuildFn build;
  double tol = 1e-5;  // bound on the error defined above (vjp_test.cc says why)
  double h = 1e-6;    // finite-difference step
};

struct GradResult {
  double max_rel_err = 0.0;  // the error defined above, maximised over checked elements
  double max_abs_err = 0.0;  // |analytic - fd|
  int64_t elements_checked = 0;
  std::string worst;  // "input x[3]: analytic ..., fd ..."
  std::set<Op> ops;   // ops of the nodes the case's build added (its coverage)
};

// The elements of a tensor of `numel` elements that get checked: all when numel <= 64, else 64
// spread over the tensor with a deterministic jitter (so strided structure is not missed).
std::vector<int64_t> sample_indices(int64_t numel);

// Runs the check. A non-ok Status means the graph could not be built, differentiated or run;
// otherwise `result` holds the errors (the caller compares them with the case's tol).
Status run_gradcheck(const GradCase& c, GradResult* result);

// The ops a case's build adds, without running anything (for the coverage test).
StatusOr<std::set<Op>> case_ops(const GradCase& c);

}  // namespace lj::test
