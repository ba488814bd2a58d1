// The kernel IR of one fused pointwise group: what passes/pointwise_fusion writes into a
// fused_pointwise node's `kernel` attribute, what the renderers turn into source and what the
// CPU interpreter (backends/cpu/fused.cc) evaluates.
//
// The loop: the group's output shape L (rank R) with adjacent dims merged where every input is
// broadcast alike, giving `rank()` loop dims; `loop_groups[k]` is how many dims of L loop dim k
// spans (0 for the one loop dim of a scalar group). Each input is dense row-major and is read
// at every loop index through a mask: '1' where the input spans that loop dim, '0' where it is
// broadcast (stride 0). The body is SSA: instruction i defines t<i>. Elementwise outputs have
// the shape of L; an optional reduction (sum | mean | max) over the LAST loop dim (which is L's
// last dim, never merged) is the last output. Nothing in the IR is a concrete B or T: loop dims
// and strides are run-time arguments (LaunchGeometry), so one kernel serves every shape.
//
// Storage and compute dtypes: the body computes in `dtype` (f32 or f64). An f32 kernel may load
// bf16 inputs (widened exactly), store bf16 outputs (rounded to nearest even, as the cast kernel
// rounds) and hold `cast` instructions: `t = cast a bf16` rounds a to bf16's precision (the value
// stays f32 in the register), `cast a f32` is the value itself. So a group of bf16 graph ops runs
// as the eager kernels do, each op in f32 on widened operands, its result rounded once to bf16
// (passes/pointwise_fusion puts a cast after each bf16 member), without a bf16 buffer between
// them.
//
// Text form: statements separated by "; " (a newline also ends one), so a node prints on one
// line. This text plus the dtypes it names is the kernel's identity (the cache key):
//   lj-kernel 1; dtype f32; loop 2 1; in f32 10; t0 = input 0; t1 =
//   constant 1.0000000000000001e-05; t2 = add t0 t1; t3 = pow_scalar t2 -0.5; out t3; reduce sum t2
// `input k` loads input k; `constant` is a literal (17 significant digits); ops go by their
// graph/ops.def names and pow_scalar carries its exponent, cast its dtype (`t4 = cast t3 bf16`);
// `out` lists the elementwise outputs in order (`out t5 bf16`: stored as bf16; no dtype: the
// kernel's) and `reduce` (at most one, in the kernel's dtype) is the last output.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "graph/op.h"

namespace lj::codegen {

struct KernelInput {
  DType dtype = DType::f32;
  std::string mask;  // one '0'/'1' per loop dim
};

// t = op(a[, b]); Op::input loads input `input`; Op::constant is `value`; pow_scalar's exponent
// is `value`.
struct Instr {
  Op op = Op::input;
  int a = -1, b = -1;
  int input = -1;
  double value = 0;
  DType to = DType::f32;  // Op::cast: bf16 (round to its precision) or the kernel's dtype
};

struct Kernel {
  DType dtype = DType::f32;      // every computed value (f32 or f64)
  std::vector<int> loop_groups;  // L dims per loop dim
  std::vector<KernelInput> inputs;
  std::vector<Instr> body;
  std::vector<int> outputs;  // body indices written as elementwise outputs
  // The dtype each elementwise output is stored as (dtype or, in an f32 kernel, bf16); empty:
  // every output in `dtype`. Read it through output_dtype().
  std::vector<DType> output_dtypes;
  Op reduce = Op::input;  // Op::sum, mean or max; Op::input: none
  int reduce_arg = -1;

  int rank() const { return static_cast<int>(loop_groups.size()); }
  bool has_reduce() const { return reduce != Op::input; }
  int num_outputs() const { return static_cast<int>(outputs.size()) + (has_reduce() ? 1 : 0); }
  // The storage dtype of output o (the reduction, the last output, is in `dtype`).
  DType output_dtype(int o) const {
    return static_cast<size_t>(o) < output_dtypes.size() ? output_dtypes[static_cast<size_t>(o)]
                                                         : dtype;
  }
  // Whether any input or output is stored in another dtype than the body computes in.
  bool mixed_storage() const;
  std::string to_text() const;
};

// Whether a kernel computing in `compute` may load, store or cast to `storage`.
bool is_kernel_storage(DType compute, DType storage);

// The unary and binary ops a kernel body may hold (cast, with its dtype, besides).
bool is_kernel_unary(Op op);
bool is_kernel_binary(Op op);

// Parses and checks (SSA order, arities, masks, ops) the text form.
StatusOr<Kernel> parse_kernel(std::string_view text);

// Concrete loop dims and per-input element strides (inputs x rank, 0 where broadcast) for one
// launch, from the tensors' dims: L is the first elementwise output's dims; a reduction-only
// kernel takes L's leading dims from its output and the last from an input that spans it.
struct LaunchGeometry {
  std::vector<int64_t> loop_dims;
  std::vector<int64_t> strides;
  int64_t rows() const;   // product of every loop dim but the last
  int64_t inner() const;  // the last loop dim
};
Status launch_geometry(const Kernel& k, std::span<const std::vector<int64_t>> in_dims,
                       std::span<const std::vector<int64_t>> out_dims, LaunchGeometry* out);

}  // namespace lj::codegen
