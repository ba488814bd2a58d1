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

}  // namespace lj
