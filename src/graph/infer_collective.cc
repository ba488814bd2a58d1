// Shape inference for the collective ops (graph/ops.def): grad_reduce_start's buffer is
// f32 (numel); grad_reduce_wait gives the types its attributes name (stages 0, 1) or a token.
#include "core/zero_config.h"
#include "graph/op_rules.h"

namespace lj {

Status infer_grad_reduce_start(const InferCtx& c, std::vector<TypedShape>* out) {
  if (c.in.empty()) return shape_error(c, "needs the bucket's gradients");
  for (const TypedShape& t : c.in) {
    if (t.dtype != DType::f32) return shape_error(c, "reduces f32 gradients");
  }
  const int64_t numel = c.attrs.i("numel");
  if (numel < 1) return shape_error(c, "needs numel >= 1");
  out->push_back(TypedShape{DType::f32, Shape{numel}});
  return ok_status();
}

Status infer_grad_reduce_wait(const InferCtx& c, std::vector<TypedShape>* out) {
  if (c.in.size() != 1 || c.in[0].dtype != DType::f32) {
    return shape_error(c, "takes one f32 buffer (grad_reduce_start's)");
  }
  if (zero_shards(static_cast<int>(c.attrs.i("stage")), ZeroSharded::gradients)) {
    out->push_back(TypedShape{DType::f32, Shape{}});
    return ok_status();
  }
  const std::vector<int64_t>& dims = c.attrs.ints("dims");
  size_t at = 0;
  for (int64_t rank : c.attrs.ints("ranks")) {
    if (rank < 0 || at + static_cast<size_t>(rank) > dims.size()) {
      return shape_error(c, "ranks and dims disagree");
    }
    std::vector<Dim> d;
    for (int64_t k = 0; k < rank; ++k) d.emplace_back(dims[at++]);
    out->push_back(TypedShape{DType::f32, Shape(d)});
  }
  if (at != dims.size() || out->empty()) return shape_error(c, "ranks and dims disagree");
  return ok_status();
}

Status infer_param_gather_start(const InferCtx& c, std::vector<TypedShape>* out) {
  if (c.in.size() != 1 || c.in[0].dtype != DType::f32 || c.in[0].shape.rank() != 1) {
    return shape_error(c, "takes the f32 (S) parameter shard");
  }
  const int64_t numel = c.attrs.i("numel");
  if (numel < 1) return shape_error(c, "needs numel >= 1");
  out->push_back(TypedShape{DType::f32, Shape{numel}});
  return ok_status();
}

Status infer_param_gather_wait(const InferCtx& c, std::vector<TypedShape>* out) {
  if (c.in.size() != 1 || c.in[0].dtype != DType::f32) {
    return shape_error(c, "takes one f32 buffer (param_gather_start's)");
  }
  std::vector<Dim> d;
  int64_t n = 1;
  for (int64_t x : c.attrs.ints("dims")) {
    d.emplace_back(x);
    n *= x;
  }
  if (n != c.attrs.i("numel")) return shape_error(c, "dims and numel disagree");
  out->push_back(TypedShape{DType::f32, Shape(d)});
  return ok_status();
}

}  // namespace lj
