#include "graph/builder_moe.h"

namespace lj {

Val topk(Val x, int64_t k) {
  if (!x.valid()) return {};
  return x.b->add1(Op::topk, {x}, {{"k", k}});
}

MoeSortResult moe_sort(Val indices, int64_t experts) {
  if (!indices.valid()) return {};
  std::vector<Val> out = indices.b->add(Op::moe_sort, {indices}, {{"experts", experts}});
  if (out.size() != 3) return {};
  return {out[0], out[1], out[2]};
}

Val grouped_matmul(Val x, Val w, Val group_sizes, bool tb) {
  if (!x.valid() || !w.valid() || !group_sizes.valid()) return {};
  return x.b->add1(Op::grouped_matmul, {x, w, group_sizes}, {{"tb", tb}});
}

Val grouped_matmul_wgrad(Val a, Val b, Val group_sizes) {
  if (!a.valid() || !b.valid() || !group_sizes.valid()) return {};
  return a.b->add1(Op::grouped_matmul_wgrad, {a, b, group_sizes});
}

ExpertRouteVals ep_route(Val group_sizes, int64_t ranks) {
  if (!group_sizes.valid()) return {};
  std::vector<Val> out = group_sizes.b->add(Op::ep_route, {group_sizes}, {{"ranks", ranks}});
  if (out.size() != 2) return {};
  return {out[0], out[1]};
}

Val ep_dispatch(Val rows, Val group_sizes, Val recv_sizes, int64_t ranks) {
  if (!rows.valid() || !group_sizes.valid() || !recv_sizes.valid()) return {};
  return rows.b->add1(Op::ep_dispatch, {rows, group_sizes, recv_sizes}, {{"ranks", ranks}});
}

Val ep_combine(Val y, Val group_sizes, Val recv_sizes, int64_t ranks) {
  if (!y.valid() || !group_sizes.valid() || !recv_sizes.valid()) return {};
  return y.b->add1(Op::ep_combine, {y, group_sizes, recv_sizes}, {{"ranks", ranks}});
}

}  // namespace lj
