// Shape inference for expert parallelism's token exchange (graph/ops.def ep_route, ep_dispatch,
// ep_combine). The received row count is data; the shapes are static: a rank receives at most
// what the P ranks of its group route, P M rows (M = N k, its own routed rows).
#include "graph/infer_util.h"

namespace lj {
namespace {

// ranks:int >= 1, and group_sizes (E) int at input i with E a multiple of it. E on success.
StatusOr<int64_t> check_route_sizes(const InferCtx& c, int i, const char* role) {
  const int64_t p = c.attrs.i("ranks");
  if (p < 1) return shape_error(c, "ranks must be >= 1");
  LJ_RETURN_IF_ERROR(infer::require_index(c, i, role));
  const Shape& g = c.in[static_cast<size_t>(i)].shape;
  if (g.rank() != 1 || !g[0].is_concrete() || g[0].coef() % p != 0) {
    return shape_error(
        c, std::string(role) + " must be (E) with E a multiple of ranks = " + std::to_string(p));
  }
  return g[0].coef();
}

// (rows (., W) float, group_sizes (E), recv_sizes (E)), both sizes of one E.
Status check_exchange(const InferCtx& c) {
  const Shape& x = c.in[0].shape;
  const DType t = c.in[0].dtype;
  if (x.rank() != 2 ||
      !(t == DType::f32 || t == DType::bf16 || t == DType::f16 || t == DType::f64)) {
    return shape_error(
        c, "rows must be (R, W) f32, bf16 or f16 (f64 for gradient checks over one rank)");
  }
  LJ_ASSIGN_OR_RETURN(const int64_t e, check_route_sizes(c, 1, "group_sizes"));
  LJ_ASSIGN_OR_RETURN(const int64_t e2, check_route_sizes(c, 2, "recv_sizes"));
  if (e != e2) return shape_error(c, "group_sizes and recv_sizes must have the same E");
  return ok_status();
}

}  // namespace

Status infer_ep_route(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_ASSIGN_OR_RETURN(const int64_t e, check_route_sizes(c, 0, "group_sizes"));
  out->assign({TypedShape{DType::i32, Shape{Dim(e)}},
               TypedShape{DType::i32, Shape{Dim(e / c.attrs.i("ranks"))}}});
  return ok_status();
}

Status infer_ep_dispatch(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_exchange(c));
  const Shape& x = c.in[0].shape;
  out->assign(1, TypedShape{c.in[0].dtype, Shape{Dim(c.attrs.i("ranks")) * x[0], x[1]}});
  return ok_status();
}

Status infer_ep_combine(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(check_exchange(c));
  const Shape& y = c.in[0].shape;
  Dim m;
  if (!y[0].divide(Dim(c.attrs.i("ranks")), &m)) {
    return shape_error(c, "y's rows " + y[0].to_string() + " are not ranks x the routed rows");
  }
  out->assign(1, TypedShape{c.in[0].dtype, Shape{m, y[1]}});
  return ok_status();
}

}  // namespace lj
