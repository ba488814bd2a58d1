#include "runtime/fused_kernels.h"

#include <chrono>
#include <map>
#include <memory>
#include <sstream>

#include "backends/fused_launch.h"

namespace lj {
namespace {

// Calls a compiled entry with the launch geometry of the node's tensors.
struct CompiledKernel {
  std::shared_ptr<const codegen::Kernel> kernel;
  codegen::KernelEntry entry = nullptr;

  Status operator()(KernelContext& c) const {
    FusedLaunch l;
    LJ_RETURN_IF_ERROR(fused_launch(*kernel, c, &l));
    entry(l.geo.loop_dims.data(), l.geo.strides.data(), l.in.data(), l.out.data(), c.threads);
    return ok_status();
  }
};

}  // namespace

std::string FusedKernelReport::to_string() const {
  std::ostringstream os;
  os << fused_nodes << " fused nodes, " << unique_kernels << " kernels (" << cache.compiled
     << " compiled, " << cache.loaded << " loaded from cache, " << cache.failed << " failed, "
     << cache.compile_seconds << " s in the compiler), " << interpreted_nodes
     << " nodes interpreted, " << wall_s << " s";
  return os.str();
}

StatusOr<FusedKernelReport> compile_kernels(const Graph& g, codegen::KernelCache& cache,
                                            Executor& ex) {
  const auto t0 = std::chrono::steady_clock::now();
  FusedKernelReport r;
  std::map<std::string, size_t> index;  // kernel text -> position in `kernels`
  std::vector<codegen::Kernel> kernels;
  std::vector<std::pair<size_t, size_t>> nodes;  // (node index, kernel position)
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::fused_pointwise) continue;
    ++r.fused_nodes;
    const std::string& text = n.attrs.s("kernel");
    auto it = index.find(text);
    if (it == index.end()) {
      LJ_ASSIGN_OR_RETURN(codegen::Kernel k, codegen::parse_kernel(text));
      it = index.emplace(text, kernels.size()).first;
      kernels.push_back(std::move(k));
    }
    nodes.emplace_back(i, it->second);
  }
  r.unique_kernels = static_cast<int64_t>(kernels.size());
  const std::vector<codegen::KernelEntry> entries = cache.get(kernels);
  std::vector<std::shared_ptr<const codegen::Kernel>> shared;
  for (codegen::Kernel& k : kernels)
    shared.push_back(std::make_shared<const codegen::Kernel>(std::move(k)));
  for (const auto& [node, k] : nodes) {
    if (entries[k] == nullptr) {
      ++r.interpreted_nodes;
      ex.set_node_kernel(node, {});
      continue;
    }
    ++r.compiled_nodes;
    ex.set_node_kernel(node, CompiledKernel{shared[k], entries[k]});
  }
  r.cache = cache.stats();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace lj
