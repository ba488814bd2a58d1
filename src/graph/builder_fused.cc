// The fused ops' builder functions: each names its op and attributes; shapes are checked by the op
// table's inference rule (graph/infer_fused.cc) inside Builder::add.
#include "graph/builder_fused.h"

namespace lj {

RmsNormResult rms_norm(Val x, Val w, double eps) {
  if (!x.valid() || !w.valid()) return {};
  const std::vector<Val> out = x.b->add(Op::rms_norm, {x, w}, {{"eps", eps}});
  return {out[0], out[1]};
}

AddRmsNormResult add_rms_norm(Val x, Val r, Val w, double eps) {
  if (!x.valid() || !r.valid() || !w.valid()) return {};
  const std::vector<Val> out = x.b->add(Op::add_rms_norm, {x, r, w}, {{"eps", eps}});
  return {out[0], out[1], out[2]};
}

RmsNormGrads rms_norm_backward(Val dy, Val x, Val w, Val rstd, Val dres) {
  if (!dy.valid() || !x.valid() || !w.valid() || !rstd.valid()) return {};
  std::vector<Val> in{dy, x, w, rstd};
  if (dres.valid()) in.push_back(dres);
  const std::vector<Val> out = dy.b->add(Op::rms_norm_backward, in);
  return {out[0], out[1]};
}

Val swiglu(Val gate, Val up) {
  if (!gate.valid() || !up.valid()) return {};
  return gate.b->add1(Op::swiglu, {gate, up});
}

SwigluGrads swiglu_backward(Val dout, Val gate, Val up) {
  if (!dout.valid() || !gate.valid() || !up.valid()) return {};
  const std::vector<Val> out = dout.b->add(Op::swiglu_backward, {dout, gate, up});
  return {out[0], out[1]};
}

Val swiglu_packed(Val x) {
  if (!x.valid()) return {};
  return x.b->add1(Op::swiglu_packed, {x});
}

Val swiglu_packed_backward(Val dout, Val x) {
  if (!dout.valid() || !x.valid()) return {};
  return dout.b->add1(Op::swiglu_packed_backward, {dout, x});
}

Val rope(Val x, Val cos, Val sin, bool inverse) {
  if (!x.valid() || !cos.valid() || !sin.valid()) return {};
  return x.b->add1(Op::rope, {x, cos, sin}, {{"inverse", inverse}});
}

}  // namespace lj
