// VJP rules of matmul, sdpa, cross_entropy and the fused matmul_add and linear_cross_entropy.
// Attention and cross_entropy have fused backward ops (sdpa_backward, cross_entropy_backward);
// matmul's gradients are matmuls; linear_cross_entropy makes its gradients in the forward.
#include "graph/autodiff/vjp.h"

namespace lj {

// C = op(A) op(B), op = transpose when ta / tb. A (..., M, K) [(..., K, M) when ta],
// B (..., K, N) [(..., N, K) when tb], dC (batch..., M, N):
//   dA = dC op(B)^T   -> ta=false: matmul(dC, B, false, !tb); ta=true: matmul(B, dC, tb, true)
//   dB = op(A)^T dC   -> tb=false: matmul(A, dC, !ta, false); tb=true: matmul(dC, A, true, ta)
// then summed over the batch dims the operand was broadcast along. The common case of a linear
// layer, x (B, T, K) times a 2-D weight, would build dB as a (B, K, N) stack of per-row GEMMs and
// then sum it; instead x and dC are flattened to (B*T, K) and (B*T, N) and dB is one GEMM.
Status vjp_matmul(VjpCtx& c) {
  const Val dc = c.dout[0];
  if (!dc.valid()) return ok_status();
  const Val a = c.in[0];
  const Val b = c.in[1];
  const bool ta = c.node.attrs.b("ta");
  const bool tb = c.node.attrs.b("tb");
  if (c.needs_grad[0]) {
    const Val da = ta ? matmul(b, dc, tb, true) : matmul(dc, b, false, !tb);
    c.din[0] = sum_to(da, a.shape());
  }
  if (c.needs_grad[1]) {
    if (b.rank() == 2 && a.rank() > 2 && !ta) {
      Dim rows(1);
      for (int i = 0; i < a.rank() - 1; ++i) rows = rows * a.shape()[i];
      const Val a2 = reshape(a, Shape{rows, a.shape()[a.rank() - 1]});      // (rows, K)
      const Val dc2 = reshape(dc, Shape{rows, dc.shape()[dc.rank() - 1]});  // (rows, N)
      c.din[1] = tb ? matmul(dc2, a2, true, false) : matmul(a2, dc2, true, false);
    } else {
      const Val db = tb ? matmul(dc, a, true, ta) : matmul(a, dc, !ta, false);
      c.din[1] = sum_to(db, b.shape());
    }
  }
  return ok_status();
}

// (out, lse) = sdpa(q, k, v): dq, dk, dv = sdpa_backward(q, k, v, out, lse, dout).
// A gradient on lse (a loss that reads the log-sum-exp itself) is not supported: the fused
// backward does not take one, and dropping it would give silently wrong gradients.
Status vjp_sdpa(VjpCtx& c) {
  if (c.dout[1].valid()) {
    return unimplemented("sdpa: the loss depends on the lse output, which has no gradient rule",
                         "compute the log-sum-exp with primitive ops if the loss needs it");
  }
  const Val dout = c.dout[0];
  if (!dout.valid()) return ok_status();
  const std::vector<Val> grads = c.b.add(
      Op::sdpa_backward, {c.in[0], c.in[1], c.in[2], c.out[0], c.out[1], dout}, c.node.attrs);
  for (size_t i = 0; i < 3; ++i) {
    if (c.needs_grad[i]) c.din[i] = grads[i];
  }
  return ok_status();
}

// loss = cross_entropy(logits, labels): dlogits = cross_entropy_backward(logits, labels, dloss).
// labels (integer) get no gradient.
Status vjp_cross_entropy(VjpCtx& c) {
  const Val dloss = c.dout[0];
  if (!dloss.valid() || !c.needs_grad[0]) return ok_status();
  c.din[0] = c.b.add1(Op::cross_entropy_backward, {c.in[0], c.in[1], dloss},
                      {{"ignore_index", c.node.attrs.i("ignore_index")}});
  return ok_status();
}

// out = matmul_add(a, b, c) = matmul(a, b) + c: dc = dout, and da, db are matmul's (the same
// rule, so the gradients are the ones the unfused subgraph gets).
Status vjp_matmul_add(VjpCtx& c) {
  const Val dout = c.dout[0];
  if (!dout.valid()) return ok_status();
  if (c.needs_grad[2]) c.din[2] = dout;
  if (!c.needs_grad[0] && !c.needs_grad[1]) return ok_status();
  Node mm = c.node;
  mm.op = Op::matmul;
  mm.inputs.resize(2);
  VjpCtx sub{c.b, mm, {c.in[0], c.in[1]}, c.out, c.dout, {c.needs_grad[0], c.needs_grad[1]}, {}};
  sub.din.resize(2);
  LJ_RETURN_IF_ERROR(vjp_matmul(sub));
  c.din[0] = sub.din[0];
  c.din[1] = sub.din[1];
  return ok_status();
}

// (loss, dx, dw) = linear_cross_entropy(x, w, labels): dx and dw are already the gradients for
// dloss = 1, so din = dx * dloss, dw * dloss (plain muls by the scalar, fusible). labels get no
// gradient; a loss that reads dx or dw is not supported.
Status vjp_linear_cross_entropy(VjpCtx& c) {
  if (c.dout[1].valid() || c.dout[2].valid()) {
    return unimplemented(
        "linear_cross_entropy: the loss depends on the dx / dw outputs, which have no gradient "
        "rule",
        "use matmul + cross_entropy if the loss needs the gradients themselves");
  }
  const Val dloss = c.dout[0];
  if (!dloss.valid()) return ok_status();
  // The loss is f32 for 16-bit x (infer_linear_cross_entropy): dloss goes to dx's dtype first.
  const Val scale = dloss.dtype() == c.out[1].dtype() ? dloss : cast(dloss, c.out[1].dtype());
  if (c.needs_grad[0]) c.din[0] = c.out[1] * scale;
  if (c.needs_grad[1]) c.din[1] = c.out[2] * scale;
  return ok_status();
}

}  // namespace lj
