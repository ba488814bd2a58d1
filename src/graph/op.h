// The op table's types. Each op is declared once, in graph/ops.def: its name, category, arity,
// shape inference, FLOP count, VJP rule and flags. Everything that needs to know about ops
// (builder, verifier, autodiff, cost model, passes, executors) reads the row through op_def().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"
#include "graph/attrs.h"

namespace lj {

enum class Op : uint16_t {
#define LJ_OP(name, ...) name,
#include "graph/ops.def"
#undef LJ_OP
};
inline constexpr int kNumOps = 0
#define LJ_OP(name, ...) +1
#include "graph/ops.def"
#undef LJ_OP
    ;

// The op categories (docs/architecture.md, "The IR"). `source` ops (input, constant, iota, random)
// have no inputs.
enum class OpCategory : uint8_t {
  source,
  elementwise,
  reduction,
  contraction,
  attention,
  data_movement,
  collective,
  opaque
};
const char* category_name(OpCategory c);

enum OpFlags : uint32_t {
  kNone = 0,
  kFusible = 1u << 0,     // may join a pointwise-fusion group
  kCapturable = 1u << 1,  // may be captured into a device graph
  kAlias = 1u << 2,       // output 0 shares input 0's storage (a view, no copy)
  // The CPU kernel stays correct when output 0 is stored over an input of the same dims (each
  // element is read before the same element is written): the memory plan may run it in place.
  kInplace = 1u << 3,
  // With kAlias: the node still launches its kernel, on the shared storage (a collective's wait
  // whose result was received into its input's buffer: passes/collectives/param_gather.h).
  kAliasLaunch = 1u << 4,
};

struct TypedShape {
  DType dtype = DType::f32;
  Shape shape;
  bool operator==(const TypedShape& o) const { return dtype == o.dtype && shape == o.shape; }
  std::string to_string() const;  // "f32(B, T, 288)"
};

struct OpDef;

// What shape inference sees. Errors name the op and the shapes involved.
struct InferCtx {
  const OpDef& def;
  std::span<const TypedShape> in;
  const Attrs& attrs;
};
using InferFn = Status (*)(const InferCtx& c, std::vector<TypedShape>* out);

// Concrete shapes for the cost model.
struct CostCtx {
  std::span<const std::vector<int64_t>> in;
  std::span<const std::vector<int64_t>> out;
  const Attrs& attrs;
};
using FlopsFn = double (*)(const CostCtx& c);

struct VjpCtx;  // graph/autodiff/vjp.h
using VjpFn = Status (*)(VjpCtx& c);

struct OpDef {
  Op op;
  const char* name;
  OpCategory category;
  int num_inputs;   // -1: variadic
  int num_outputs;  // -1: variadic (fused_pointwise)
  InferFn infer;
  FlopsFn flops;
  VjpFn vjp;  // nullptr: not differentiable
  uint32_t flags;
  bool has(OpFlags f) const { return (flags & f) != 0; }
};

const OpDef& op_def(Op op);
inline const char* op_name(Op op) {
  return op_def(op).name;
}
// Finds an op by name; false when unknown.
bool find_op(const std::string& name, Op* out);

}  // namespace lj
