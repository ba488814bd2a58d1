#include "runtime/executor.h"

#include <cstdlib>

#include "backends/cpu/cpu.h"
#include "core/check.h"
#include "core/units.h"

namespace lj {
namespace {

// Kernel scratch from the device allocator, released when the kernel returns.
class DeviceWorkspace final : public Workspace {
 public:
  explicit DeviceWorkspace(Device& dev) : dev_(dev) {}
  ~DeviceWorkspace() override {
    for (auto& [p, n] : blocks_) dev_.allocator().deallocate(p, n, MemCategory::workspace);
  }
  void* get(size_t bytes) override {
    void* p = dev_.allocator().allocate(bytes, MemCategory::workspace);
    LJ_CHECK(p != nullptr) << "out of host memory for " << bytes << " bytes of workspace";
    blocks_.emplace_back(p, bytes);
    return p;
  }

 private:
  Device& dev_;
  std::vector<std::pair<void*, size_t>> blocks_;
};

}  // namespace

Executor::Executor(const Graph& g, Device& dev, ExecutorOptions options) : g_(g), dev_(dev), options_(options) {
  const size_t nv = g.values().size();
  last_use_.assign(nv, -1);
  is_output_.assign(nv, false);
  category_.assign(nv, MemCategory::temporaries);
  std::vector<bool> read_by_backward(nv, false);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    for (ValueId v : n.inputs) {
      last_use_[static_cast<size_t>(v)] = static_cast<int>(i);
      if (n.phase != Phase::forward) read_by_backward[static_cast<size_t>(v)] = true;
    }
  }
  for (const auto& o : g.outputs()) is_output_[static_cast<size_t>(o.value)] = true;
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.outputs) {
      const auto k = static_cast<size_t>(v);
      if (n.phase == Phase::forward && read_by_backward[k]) category_[k] = MemCategory::activations;
      if (n.phase == Phase::backward && is_output_[k]) category_[k] = MemCategory::grads;
      if (n.phase == Phase::optimizer && is_output_[k]) category_[k] = MemCategory::optimizer;
    }
  }
}

Status Executor::bind(std::span<const Tensor> inputs) {
  const auto& ins = g_.inputs();
  if (inputs.size() != ins.size()) {
    return invalid_argument("graph takes " + std::to_string(ins.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  }
  env_ = SymEnv();
  // Pass 1 binds single symbols; pass 2 checks every dim under the bindings.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ins.size(); ++i) {
      const TypedShape& want = g_.type(ins[i]);
      const Tensor& t = inputs[i];
      const std::string& name = g_.input_name(ins[i]);
      if (!t.defined()) return invalid_argument("input '" + name + "' is not set");
      if (t.dtype() != want.dtype || static_cast<int>(t.dims().size()) != want.shape.rank()) {
        return invalid_argument("input '" + name + "' is " + dtype_name(t.dtype()) + dims_to_string(t.dims()) +
                                ", the graph declares " + want.to_string());
      }
      for (int d = 0; d < want.shape.rank(); ++d) {
        const Dim& dim = want.shape[d];
        const int64_t fed = t.dims()[static_cast<size_t>(d)];
        if (pass == 0 && dim.coef() == 1 && dim.syms().size() == 1 && env_.get(dim.syms()[0]) == 0) {
          env_.set(dim.syms()[0], fed);
        }
        if (pass == 1 && dim.eval(env_) != fed) {
          return invalid_argument("input '" + name + "' is " + dims_to_string(t.dims()) + ", the graph declares " +
                                  want.shape.to_string() + " with " + env_.to_string());
        }
      }
    }
  }
  return ok_status();
}

StatusOr<std::vector<Tensor>> Executor::run(std::span<const Tensor> inputs) {
  LJ_RETURN_IF_ERROR(bind(inputs));
  const KernelTable& kernels = cpu::kernels();
  const size_t nv = g_.values().size();
  std::vector<Tensor> vals(nv);
  for (size_t i = 0; i < g_.inputs().size(); ++i) vals[static_cast<size_t>(g_.inputs()[i])] = inputs[i];
  kernels_launched_ = 0;

  std::vector<TensorView> in_views, out_views;
  std::vector<int64_t> dims;
  for (size_t ni = 0; ni < g_.nodes().size(); ++ni) {
    const Node& n = g_.nodes()[ni];
    if (n.op == Op::input) continue;
    const OpDef& def = op_def(n.op);
    if (def.has(kAlias)) {
      const ValueId out = n.outputs[0];
      LJ_CHECK(g_.type(out).shape.eval(env_, &dims)) << "unbound symbol";
      vals[static_cast<size_t>(out)] = vals[static_cast<size_t>(n.inputs[0])].reshaped(dims);
    } else {
      const KernelFn fn = kernels[n.op];
      if (fn == nullptr) return unimplemented(std::string("no CPU kernel for op ") + def.name);
      in_views.clear();
      out_views.clear();
      for (ValueId v : n.inputs) in_views.push_back(vals[static_cast<size_t>(v)].view());
      for (ValueId v : n.outputs) {
        const TypedShape& t = g_.type(v);
        LJ_CHECK(t.shape.eval(env_, &dims)) << "unbound symbol in " << t.to_string();
        vals[static_cast<size_t>(v)] = Tensor::empty(dev_, t.dtype, dims, category_[static_cast<size_t>(v)]);
        out_views.push_back(vals[static_cast<size_t>(v)].view());
      }
      DeviceWorkspace ws(dev_);
      KernelContext ctx{n, in_views, out_views, dev_.threads(), &ws};
      const double t0 = options_.profile ? now_seconds() : 0.0;
      Status s = fn(ctx);
      if (!s.ok()) {
        return s.with_context(std::string(def.name) + (n.scope.empty() ? "" : " at " + n.scope));
      }
      ++kernels_launched_;
      if (options_.profile) {
        const double dt = now_seconds() - t0;
        OpProfile* p = nullptr;
        for (auto& e : profile_) {
          if (e.op == n.op && e.phase == n.phase) p = &e;
        }
        if (p == nullptr) p = &profile_.emplace_back(OpProfile{n.op, n.phase});
        ++p->calls;
        p->seconds += dt;
        p->flops += node_cost(g_, n, env_).flops;
      }
    }
    // Free what this node read for the last time, and outputs nobody reads.
    for (ValueId v : n.inputs) {
      const auto k = static_cast<size_t>(v);
      if (last_use_[k] == static_cast<int>(ni) && !is_output_[k]) vals[k] = Tensor();
    }
    for (ValueId v : n.outputs) {
      const auto k = static_cast<size_t>(v);
      if (last_use_[k] < 0 && !is_output_[k]) vals[k] = Tensor();
    }
  }

  std::vector<Tensor> outs;
  outs.reserve(g_.outputs().size());
  for (const auto& o : g_.outputs()) outs.push_back(vals[static_cast<size_t>(o.value)]);
  return outs;
}

}  // namespace lj
