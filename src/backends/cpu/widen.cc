// Widening: the f32 kernels run on bf16 / f16 values (cpu.h, widen_half_kernels). A first
// version for every op family that has no 16-bit path of its own: it costs a conversion pass
// over each 16-bit operand and f32 workspace the size of those operands, but each op computes in
// f32 and rounds its outputs once, as a native 16-bit kernel would.
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

// The kernels as registered, before widening.
KernelTable& inner_table() {
  static KernelTable t;
  return t;
}

bool is_half(DType t) {
  return t == DType::bf16 || t == DType::f16;
}

size_t rounded_bytes(int64_t numel) {
  return (static_cast<size_t>(numel) * sizeof(float) + 63) / 64 * 64;
}

void to_f32(const TensorView& x, float* y, int threads) {
  parallel_for(threads, x.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
    if (x.dtype == DType::bf16) {
      bf16_to_f32_row(x.as<uint16_t>() + b, y + b, e - b);
    } else {
      const f16_t* h = x.as<f16_t>();
      for (int64_t i = b; i < e; ++i) y[i] = convert<float>(h[i]);
    }
  });
}

void from_f32(const float* x, const TensorView& y, int threads) {
  parallel_for(threads, y.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
    if (y.dtype == DType::bf16) {
      f32_to_bf16_row(x + b, y.as<uint16_t>() + b, e - b);
    } else {
      f16_t* h = y.as<f16_t>();
      for (int64_t i = b; i < e; ++i) h[i] = convert<f16_t>(x[i]);
    }
  });
}

// Whether a kernel call on these dtypes goes through widening: f16 always, bf16 unless the
// kernel takes bf16 itself.
bool needs_widening(Op op, std::span<const TensorView> in, std::span<const TensorView> out) {
  bool bf16 = false, f16 = false;
  for (const auto* vs : {&in, &out}) {
    for (const TensorView& v : *vs) {
      bf16 = bf16 || v.dtype == DType::bf16;
      f16 = f16 || v.dtype == DType::f16;
    }
  }
  return f16 || (bf16 && !inner_table().bf16[static_cast<int>(op)]);
}

Status widened_forward(KernelContext& c) {
  const KernelFn inner = inner_table()[c.node.op];
  if (!needs_widening(c.node.op, c.in, c.out)) return inner(c);
  std::vector<TensorView> in(c.in.begin(), c.in.end());
  std::vector<TensorView> out(c.out.begin(), c.out.end());
  DType from = DType::f32;
  for (TensorView& v : in) {
    if (!is_half(v.dtype)) continue;
    from = v.dtype;
    auto* f = static_cast<float*>(c.workspace->get(rounded_bytes(v.numel())));
    to_f32(v, f, c.threads);
    v.data = f;
    v.dtype = DType::f32;
  }
  for (TensorView& v : out) {
    if (!is_half(v.dtype)) continue;
    v.data = c.workspace->get(rounded_bytes(v.numel()));
    v.dtype = DType::f32;
  }
  KernelContext wide{c.node, in, out, c.threads, c.workspace, from};
  LJ_RETURN_IF_ERROR(inner(wide));
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_half(c.out[i].dtype)) from_f32(out[i].as<float>(), c.out[i], c.threads);
  }
  return ok_status();
}

// The f32 copies of the 16-bit inputs and outputs, then what the kernel asks for on them.
size_t widened_workspace(const Node& n, std::span<const TensorView> in, int threads) {
  const OpDef& def = op_def(n.op);
  const WorkspaceFn inner = inner_table().workspace(n.op);
  size_t bytes = 0;
  std::vector<TensorView> wide(in.begin(), in.end());
  std::vector<TypedShape> types;
  for (TensorView& v : wide) {
    types.push_back(TypedShape{v.dtype, Shape::concrete(v.dims)});
    if (!is_half(v.dtype)) continue;
    bytes += rounded_bytes(v.numel());
    v.dtype = DType::f32;
  }
  std::vector<TypedShape> outs;
  std::vector<TensorView> out_views;
  if (def.infer(InferCtx{def, types, n.attrs}, &outs).ok()) {
    for (const TypedShape& t : outs) {
      out_views.push_back(TensorView{nullptr, t.dtype, {}});
      if (!is_half(t.dtype)) continue;
      // A shape attribute with symbols (fused_pointwise's loop) leaves it symbolic: uncounted.
      if (t.shape.is_concrete()) bytes += rounded_bytes(numel_of(t.shape.concrete_dims()));
    }
  }
  if (!needs_widening(n.op, in, out_views)) return inner ? inner(n, in, threads) : 0;
  return bytes + (inner ? inner(n, wide, threads) : 0);
}

}  // namespace

void widen_half_kernels(KernelTable& t) {
  inner_table() = t;
  for (int i = 0; i < kNumOps; ++i) {
    // Every kernel: a bf16-native one still needs widening for f16 (needs_widening decides per
    // call, so its bf16 calls reach it directly).
    if (t.fn[i] == nullptr) continue;
    t.fn[i] = widened_forward;
    t.ws[i] = widened_workspace;
  }
}

}  // namespace lj::cpu
