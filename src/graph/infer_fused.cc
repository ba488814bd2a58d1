// Shape inference and FLOPs of fused_pointwise (made by passes/pointwise_fusion). The outputs
// are read from the attributes, not the inputs: a group may broadcast its inputs to a loop shape
// none of them has (an expand or a constant inside the group).
#include <sstream>

#include "graph/infer_util.h"

namespace lj {

// fused_pointwise: `outputs` values of (dtype, shape), then, when `reduce` is set, shape reduced
// over its last axis (kept as 1 with keepdim).
Status infer_fused_pointwise(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& loop = c.attrs.shape("shape");
  const DType dtype = c.attrs.dtype("dtype");
  LJ_RETURN_IF_ERROR(infer::check_shape_attr(c, loop, "loop shape"));
  const int64_t n = c.attrs.i("outputs");
  const bool reduce = !c.attrs.s("reduce").empty();
  if (n < 0 || (n == 0 && !reduce)) return shape_error(c, "a fused group needs an output");
  if (reduce && loop.rank() == 0) return shape_error(c, "a reduction needs a loop of rank >= 1");
  out->assign(static_cast<size_t>(n), TypedShape{dtype, loop});
  // `out_dtypes` (optional): each elementwise output's storage dtype ("bf16 f32"), when some
  // differ from the compute dtype.
  if (c.attrs.has("out_dtypes")) {
    std::istringstream words(c.attrs.s("out_dtypes"));
    size_t o = 0;
    for (std::string w; words >> w; ++o) {
      if (o >= out->size() || !parse_dtype(w, &(*out)[o].dtype)) {
        return shape_error(c, "bad out_dtypes '" + c.attrs.s("out_dtypes") + "'");
      }
    }
    if (o != out->size()) return shape_error(c, "out_dtypes names every elementwise output");
  }
  if (reduce) {
    std::vector<Dim> dims = loop.dims();
    if (c.attrs.b("keepdim")) {
      dims.back() = Dim(1);
    } else {
      dims.pop_back();
    }
    out->push_back(TypedShape{dtype, Shape(std::move(dims))});
  }
  return ok_status();
}

// The group's FLOPs per loop element (the pass sums its members' counts) times the loop size,
// taken as the largest operand (every operand broadcasts to the loop; the largest spans it
// unless the group broadcasts beyond every input and output, where this undercounts).
double flops_fused_pointwise(const CostCtx& c) {
  double elems = 0;
  for (const auto& dims : {c.in, c.out}) {
    for (const std::vector<int64_t>& d : dims) {
      double n = 1;
      for (int64_t x : d) n *= static_cast<double>(x);
      elems = n > elems ? n : elems;
    }
  }
  return elems * c.attrs.f_or("flops", 1.0);
}

}  // namespace lj
