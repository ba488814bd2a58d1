// The kernel interface every backend implements. A kernel gets concrete, dense, row-major
// tensors (inputs and pre-allocated outputs whose shapes the op table inferred), the node's
// attributes, the thread count, and a way to ask for scratch memory. Kernels are named
// <op>_forward in their family file (backends/cpu/elementwise.cc, ...) and listed in the
// backend's table, indexed by Op.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "graph/ir.h"

namespace lj {

// A dense row-major tensor the kernel reads or writes. Does not own memory.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> dims;

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t numel() const { return numel_of(dims); }
  int64_t dim(int axis) const { return dims[static_cast<size_t>(axis < 0 ? axis + rank() : axis)]; }
  size_t bytes() const {
    return static_cast<size_t>(numel()) * static_cast<size_t>(dtype_size(dtype));
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Scratch memory for the duration of one kernel call, counted as workspace.
class Workspace {
 public:
  virtual ~Workspace() = default;
  // 64-byte aligned; freed when the kernel returns. resource_exhausted when the memory it comes
  // from has no room (a GPU's: backends/cuda/memory.h): the kernel returns that Status, so it
  // asks before it launches anything (the CUDA kernels make one request, sized by
  // backends/cuda/workspace.h).
  virtual StatusOr<void*> acquire(size_t bytes) = 0;
  // acquire() for the CPU kernels, which ask in the middle of their loops: out of host memory
  // for scratch ends the process, as the host allocator does for tensors.
  void* get(size_t bytes) {
    StatusOr<void*> p = acquire(bytes);
    LJ_CHECK(p.ok()) << "kernel workspace: " << p.status().to_string();
    return *p;
  }
};

struct KernelContext {
  const Node& node;
  std::span<const TensorView> in;
  std::span<TensorView> out;
  int threads = 1;
  Workspace* workspace = nullptr;
  // bf16 or f16 when the CPU's widening (backends/cpu/widen.cc) runs this kernel on f32 copies of
  // 16-bit operands, which it rounds back: a kernel may then multiply at that precision (the
  // attention's bf16 dot products). f32 otherwise.
  DType widened_from = DType::f32;

  const Attrs& attrs() const { return node.attrs; }
};

// Returns a Status for what data can get wrong (a token id past the vocabulary); shape and
// dtype invariants were checked when the graph was built and are LJ_CHECKed.
using KernelFn = Status (*)(KernelContext& c);

// The scratch bytes a kernel will ask its Workspace for (the sum of its get() calls, each
// rounded up to 64), from its inputs' dtypes and dims (data may be null) and the thread count:
// how a dry run accounts for workspace without launching anything.
using WorkspaceFn = size_t (*)(const Node& n, std::span<const TensorView> in, int threads);

// A backend's kernels, indexed by Op. nullptr: the backend has no kernel for that op. `ws`:
// the kernels that use scratch say how much (nullptr: none).
struct KernelTable {
  KernelFn fn[kNumOps] = {};
  WorkspaceFn ws[kNumOps] = {};
  // The kernel takes bf16 operands itself (loads bf16, computes in f32, stores bf16). A backend
  // may run the others on bf16 (and every kernel on f16) by widening to f32 around the kernel.
  bool bf16[kNumOps] = {};
  WorkspaceFn workspace(Op op) const { return ws[static_cast<int>(op)]; }
  KernelFn& operator[](Op op) { return fn[static_cast<int>(op)]; }
  KernelFn operator[](Op op) const { return fn[static_cast<int>(op)]; }
};

}  // namespace lj
