// Shape inference for `opaque` (a host callback): the output has input 0's type; the backward
// form reads (x, dy) of that same type.
#include "graph/op_rules.h"

namespace lj {

Status infer_opaque(const InferCtx& c, std::vector<TypedShape>* out) {
  if (!c.attrs.has("callback")) return shape_error(c, "needs a callback name");
  const size_t want = c.attrs.b_or("backward", false) ? 2 : 1;
  if (c.in.size() != want) {
    return shape_error(
        c, "takes " + std::to_string(want) + " input(s), got " + std::to_string(c.in.size()));
  }
  if (want == 2 && !(c.in[0] == c.in[1])) return shape_error(c, "x and dy must have one type");
  out->push_back(c.in[0]);
  return ok_status();
}

}  // namespace lj
