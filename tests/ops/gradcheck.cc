// The finite-difference gradient check; see gradcheck.h.
#include "gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "graph/autodiff/autodiff.h"
#include "runtime/executor.h"
#include "runtime/tensor.h"

namespace lj::test {
namespace {

constexpr int64_t kMaxSamples = 64;
constexpr double kErrFloor = 1e-3;

// The graph of a case: its inputs, the build's ops, the r_k inputs and the scalar loss (output
// "loss"). `ops` gets the ops of the nodes the build added.
struct CaseGraph {
  Graph g;
  std::vector<ValueId> case_inputs;  // one per GradInput
  std::vector<ref::RefTensor> r;     // the fixed weights r_k
  ValueId loss = kNoValue;
  std::set<Op> ops;
};

Status build_case_graph(const GradCase& c, CaseGraph* cg) {
  Builder b(&cg->g);
  std::vector<Val> in;
  for (const GradInput& gi : c.inputs) {
    in.push_back(b.input(gi.name, gi.value.dtype, Shape::concrete(gi.value.dims)));
    cg->case_inputs.push_back(in.back().id);
  }
  const size_t first_node = cg->g.nodes().size();
  std::vector<Val> outs = c.build(b, in);
  if (!b.ok()) return b.status().with_context("building case " + c.name);
  for (size_t i = first_node; i < cg->g.nodes().size(); ++i) cg->ops.insert(cg->g.nodes()[i].op);

  Val loss;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].valid() || !is_float(outs[k].dtype())) {
      return invalid_argument("case " + c.name + ": output " + std::to_string(k) +
                              " is not a valid float value");
    }
    const std::vector<int64_t> dims = outs[k].shape().concrete_dims();
    // Deterministic weights in [-1, 1], distinct per output.
    ref::RefTensor r = ref::zeros(outs[k].dtype(), dims);
    for (int64_t i = 0; i < r.numel(); ++i) {
      r[i] = std::sin(1.0 + 0.7 * static_cast<double>(i) + 2.3 * static_cast<double>(k));
    }
    cg->r.push_back(r);
    Val rv = b.input("r" + std::to_string(k), outs[k].dtype(), outs[k].shape());
    Val term = outs[k] * rv;
    if (term.valid() && term.rank() > 0) term = sum(term, {}, false);
    loss = loss.valid() ? loss + term : term;
  }
  if (!b.ok()) return b.status().with_context("building the loss of case " + c.name);
  if (!loss.valid()) return invalid_argument("case " + c.name + " has no outputs");
  cg->loss = loss.id;
  b.output("loss", loss);
  return ok_status();
}

std::vector<Tensor> feed(Device& dev, const GradCase& c, const CaseGraph& cg) {
  std::vector<Tensor> t;
  for (const GradInput& gi : c.inputs) {
    t.push_back(Tensor::from_doubles(dev, gi.value.dtype, gi.value.dims, gi.value.data));
  }
  for (const ref::RefTensor& r : cg.r)
    t.push_back(Tensor::from_doubles(dev, r.dtype, r.dims, r.data));
  return t;
}

}  // namespace

std::vector<int64_t> sample_indices(int64_t numel) {
  std::vector<int64_t> idx;
  if (numel <= kMaxSamples) {
    for (int64_t i = 0; i < numel; ++i) idx.push_back(i);
    return idx;
  }
  const int64_t stride = numel / kMaxSamples;
  for (int64_t j = 0; j < kMaxSamples; ++j) {
    const int64_t jitter = (j * 7919 + 13) % stride;
    idx.push_back(std::min(numel - 1, j * stride + jitter));
  }
  idx.back() = numel - 1;
  return idx;
}

StatusOr<std::set<Op>> case_ops(const GradCase& c) {
  CaseGraph cg;
  LJ_RETURN_IF_ERROR(build_case_graph(c, &cg));
  return cg.ops;
}

Status run_gradcheck(const GradCase& c, GradResult* result) {
  *result = GradResult{};
  CaseGraph cg;
  LJ_RETURN_IF_ERROR(build_case_graph(c, &cg));
  result->ops = cg.ops;

  // The forward-only graph evaluates the loss for the finite differences.
  const Graph forward = cg.g;
  std::vector<ValueId> wrt;
  std::vector<size_t> wrt_input;  // index into c.inputs
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].differentiable) {
      wrt.push_back(cg.case_inputs[i]);
      wrt_input.push_back(i);
    }
  }
  LJ_ASSIGN_OR_RETURN(std::vector<ValueId> grads, append_gradients(&cg.g, cg.loss, wrt));
  for (size_t k = 0; k < grads.size(); ++k)
    cg.g.add_output("grad_" + c.inputs[wrt_input[k]].name, grads[k]);
  LJ_RETURN_IF_ERROR(verify(cg.g).with_context("verifying the joint graph of " + c.name));

  Device dev(2);
  std::vector<Tensor> base = feed(dev, c, cg);
  Executor joint(cg.g, dev);
  LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, joint.run(base));

  Executor fwd(forward, dev);
  auto loss_at = [&](size_t input, int64_t i, double value) -> StatusOr<double> {
    std::vector<Tensor> args = base;
    ref::RefTensor x = c.inputs[input].value;
    x[i] = value;
    args[input] = Tensor::from_doubles(dev, x.dtype, x.dims, x.data);
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> l, fwd.run(args));
    return l[0].at(0);
  };

  for (size_t k = 0; k < wrt.size(); ++k) {
    const GradInput& gi = c.inputs[wrt_input[k]];
    const Tensor& analytic = outs[1 + k];
    if (analytic.dims() != gi.value.dims) {
      return internal_error("case " + c.name + ": gradient of " + gi.name + " has dims " +
                            dims_to_string(analytic.dims()) + ", input " +
                            dims_to_string(gi.value.dims));
    }
    for (int64_t i : sample_indices(gi.value.numel())) {
      const double x0 = gi.value[i];
      LJ_ASSIGN_OR_RETURN(double lp, loss_at(wrt_input[k], i, x0 + c.h));
      LJ_ASSIGN_OR_RETURN(double lm, loss_at(wrt_input[k], i, x0 - c.h));
      const double fd = (lp - lm) / (2.0 * c.h);
      const double a = analytic.at(i);
      const double abs_err = std::abs(a - fd);
      const double rel_err = abs_err / std::max({std::abs(a), std::abs(fd), kErrFloor});
      ++result->elements_checked;
      result->max_abs_err = std::max(result->max_abs_err, abs_err);
      const double e = std::isnan(rel_err) ? INFINITY : rel_err;
      if (result->worst.empty() || e > result->max_rel_err) {
        std::ostringstream s;
        s << "input " << gi.name << "[" << i << "]: analytic " << a << ", fd " << fd;
        result->worst = s.str();
        result->max_rel_err = e;
      }
    }
  }
  return ok_status();
}

}  // namespace lj::test
