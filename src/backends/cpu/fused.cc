// The CPU interpreter of fused_pointwise: evaluates the node's kernel IR (codegen/kernel_ir.h)
// element by element. It is the correct, slow fallback for a kernel the system compiler could
// not build; the executor runs the compiled kernel instead when there is one
// (runtime/fused_kernels.h). Same arithmetic as the eager kernels, except exp (libm's, where the
// eager f32 kernels use a ~2 ulp polynomial) and the order of reduction sums (f64 accumulation in
// row order). Rows are split over threads; each row's result depends on the shapes only.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"
#include "codegen/kernel_ir.h"

namespace lj::cpu {
namespace {

template <class T>
T eval_unary(const codegen::Instr& x, T a) {
  switch (x.op) {
    case Op::neg:
      return -a;
    case Op::exp:
      return std::exp(a);
    case Op::log:
      return std::log(a);
    case Op::sqrt:
      return std::sqrt(a);
    case Op::rsqrt:
      return T(1) / std::sqrt(a);
    case Op::reciprocal:
      return T(1) / a;
    case Op::square:
      return a * a;
    case Op::silu:
      return a / (T(1) + std::exp(-a));
    case Op::sigmoid:
      return T(1) / (T(1) + std::exp(-a));
    case Op::tanh:
      return std::tanh(a);
    case Op::pow_scalar:
      if (x.value == 1.0) return a;
      if (x.value == 2.0) return a * a;
      if (x.value == -1.0) return T(1) / a;
      return std::pow(a, static_cast<T>(x.value));
    default:
      LJ_CHECK(false) << "not a unary kernel op: " << op_name(x.op);
      return a;
  }
}

template <class T>
T eval_binary(Op op, T a, T b) {
  switch (op) {
    case Op::add:
      return a + b;
    case Op::sub:
      return a - b;
    case Op::mul:
      return a * b;
    case Op::div:
      return a / b;
    default:
      LJ_CHECK(false) << "not a binary kernel op: " << op_name(op);
      return a;
  }
}

template <class T>
void interpret(KernelContext& c, const codegen::Kernel& k, const codegen::LaunchGeometry& geo) {
  const int rank = k.rank();
  const int64_t rows = geo.rows(), n = geo.inner();
  const size_t nin = k.inputs.size();
  parallel_for(
      c.threads, rows, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(n, 1)),
      [&](int64_t r0, int64_t r1) {
        std::vector<T> t(k.body.size());
        std::vector<int64_t> base(nin);
        for (int64_t r = r0; r < r1; ++r) {
          int64_t rem = r;
          std::fill(base.begin(), base.end(), 0);
          for (int d = rank - 2; d >= 0; --d) {
            const int64_t idx = rem % geo.loop_dims[static_cast<size_t>(d)];
            rem /= geo.loop_dims[static_cast<size_t>(d)];
            for (size_t i = 0; i < nin; ++i)
              base[i] += idx * geo.strides[i * static_cast<size_t>(rank) + static_cast<size_t>(d)];
          }
          double sum = 0;
          T mx = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            for (size_t i = 0; i < k.body.size(); ++i) {
              const codegen::Instr& x = k.body[i];
              if (x.op == Op::input) {
                const auto in = static_cast<size_t>(x.input);
                const int64_t s =
                    geo.strides[in * static_cast<size_t>(rank) + static_cast<size_t>(rank - 1)];
                const int64_t at = base[in] + j * s;
                t[i] = c.in[in].dtype == DType::bf16
                           ? static_cast<T>(bf16_to_f32(c.in[in].as<uint16_t>()[at]))
                           : c.in[in].as<T>()[at];
              } else if (x.op == Op::cast) {
                const T a = t[static_cast<size_t>(x.a)];
                t[i] = x.to == DType::bf16
                           ? static_cast<T>(bf16_to_f32(f32_to_bf16(static_cast<float>(a))))
                           : a;
              } else if (x.op == Op::constant) {
                t[i] = static_cast<T>(x.value);
              } else if (x.b >= 0) {
                t[i] = eval_binary(x.op, t[static_cast<size_t>(x.a)], t[static_cast<size_t>(x.b)]);
              } else {
                t[i] = eval_unary(x, t[static_cast<size_t>(x.a)]);
              }
            }
            for (size_t o = 0; o < k.outputs.size(); ++o) {
              const T v = t[static_cast<size_t>(k.outputs[o])];
              if (k.output_dtype(static_cast<int>(o)) == DType::bf16) {
                c.out[o].as<uint16_t>()[r * n + j] = f32_to_bf16(static_cast<float>(v));
              } else {
                c.out[o].as<T>()[r * n + j] = v;
              }
            }
            if (k.has_reduce()) {
              const T v = t[static_cast<size_t>(k.reduce_arg)];
              sum += static_cast<double>(v);
              mx = (v > mx || v != v) ? v : mx;
            }
          }
          if (k.has_reduce()) {
            T* out = c.out[k.outputs.size()].as<T>();
            out[r] = k.reduce == Op::max    ? mx
                     : k.reduce == Op::mean ? static_cast<T>(sum / static_cast<double>(n))
                                            : static_cast<T>(sum);
          }
        }
      });
}

Status fused_pointwise_forward(KernelContext& c) {
  LJ_ASSIGN_OR_RETURN(codegen::Kernel k, codegen::parse_kernel(c.attrs().s("kernel")));
  std::vector<std::vector<int64_t>> in_dims, out_dims;
  for (const TensorView& v : c.in) in_dims.push_back(v.dims);
  for (const TensorView& v : c.out) out_dims.push_back(v.dims);
  codegen::LaunchGeometry geo;
  LJ_RETURN_IF_ERROR(codegen::launch_geometry(k, in_dims, out_dims, &geo));
  if (k.dtype == DType::f32) {
    interpret<float>(c, k, geo);
  } else {
    interpret<double>(c, k, geo);
  }
  return ok_status();
}

}  // namespace

void register_fused(KernelTable& t) {
  t[Op::fused_pointwise] = fused_pointwise_forward;
  t.bf16[static_cast<int>(Op::fused_pointwise)] = true;  // loads and stores bf16 itself
}

}  // namespace lj::cpu
