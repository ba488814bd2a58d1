#include "graph/moe_rows.h"

namespace lj {

double grouped_rows_fraction(const Graph& g, const Node& n) {
  if ((n.op != Op::grouped_matmul && n.op != Op::grouped_matmul_wgrad) || n.inputs.size() < 3)
    return 1.0;
  const Node& sizes = g.producer(n.inputs[2]);
  if (sizes.op != Op::ep_route) return 1.0;
  const int64_t ranks = sizes.attrs.i("ranks");
  return ranks > 1 ? 1.0 / static_cast<double>(ranks) : 1.0;
}

}  // namespace lj
