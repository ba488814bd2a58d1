// The op table, generated from graph/ops.def.
#include <cstring>

#include "graph/autodiff/vjp.h"
#include "graph/op_rules.h"

namespace lj {
namespace {

constexpr OpDef kOps[] = {
#define LJ_OP(name, cat, nin, nout, infer, flops, vjp, flags) \
  {Op::name, #name, OpCategory::cat, nin, nout, infer, flops, vjp, flags},
#include "graph/ops.def"
#undef LJ_OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps);

}  // namespace

const OpDef& op_def(Op op) {
  return kOps[static_cast<int>(op)];
}

bool find_op(const std::string& name, Op* out) {
  for (const auto& d : kOps) {
    if (name == d.name) return *out = d.op, true;
  }
  return false;
}

const char* category_name(OpCategory c) {
  static constexpr const char* kNames[] = {"source",      "elementwise", "reduction",
                                           "contraction", "attention",   "data_movement",
                                           "collective",  "opaque"};
  return kNames[static_cast<int>(c)];
}

std::string TypedShape::to_string() const {
  return std::string(dtype_name(dtype)) + shape.to_string();
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  const int r = std::max(a.rank(), b.rank());
  std::vector<Dim> dims(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i;
    const int ib = b.rank() - r + i;
    const Dim da = ia >= 0 ? a[ia] : Dim(1);
    const Dim db = ib >= 0 ? b[ib] : Dim(1);
    if (da == db || db == Dim(1)) {
      dims[static_cast<size_t>(i)] = da;
    } else if (da == Dim(1)) {
      dims[static_cast<size_t>(i)] = db;
    } else {
      return false;
    }
  }
  *out = Shape(std::move(dims));
  return true;
}

Status shape_error(const InferCtx& c, const std::string& what) {
  std::string s = std::string(c.def.name) + ": " + what + " (inputs:";
  for (size_t i = 0; i < c.in.size(); ++i) s += (i ? ", " : " ") + c.in[i].to_string();
  if (c.in.empty()) s += " none";
  s += ")";
  return invalid_argument(s);
}

}  // namespace lj
