#include "plan/graph_figures.h"

#include <algorithm>
#include <map>

#include <omp.h>

#include "core/check.h"
#include "models/moe.h"
#include "passes/master_weights/master_weights.h"
#include "plan/mpi_temporaries.h"
#include "plan/time_model.h"
#include "probe/gemm_calls.h"
#include "probe/host_rates.h"
#include "probe/sgemm_buffers.h"
#include "runtime/executor.h"

namespace lj {
namespace {

// GraphFigures::gemm_packing for one node: rows of the GEMM (all leading dims of the output; for
// the fused loss, all rows of x) against kGemmPackRows, and the B operand's elements (N·K; the
// fused loss: V·C) against kGemmPackElements.
bool packs_gemm(const Graph& g, const Node& n, const SymEnv& env) {
  if (n.phase != Phase::forward || n.outputs.empty() || n.inputs.size() < 2) return false;
  std::vector<int64_t> x, w;
  if (n.op == Op::linear_cross_entropy) {
    if (!g.type(n.inputs[0]).shape.eval(env, &x) || !g.type(n.inputs[1]).shape.eval(env, &w) ||
        x.size() != 2 || w.size() != 2)
      return false;
    return x[0] > kGemmPackRows && w[0] * w[1] >= kGemmPackElements;
  }
  if (n.op != Op::matmul && n.op != Op::matmul_add) return false;
  if (!g.type(n.outputs[0]).shape.eval(env, &x) || x.size() < 2) return false;
  const int64_t cols = x.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) rows *= x[i];
  if (rows <= 0 || cols <= 0) return false;
  const double inner =
      node_cost(g, n, env).flops / (2.0 * static_cast<double>(rows) * static_cast<double>(cols));
  return rows > kGemmPackRows &&
         static_cast<double>(cols) * inner >= static_cast<double>(kGemmPackElements);
}

// The step's persistent inputs, in the order the trainer allocates them: tokens, targets, the
// rope tables, then the weights (ZeRO-3: this rank's shard) with the fp16 loss scale, and under
// mixed precision the parameters' 16-bit copies.
std::vector<Tensor> step_inputs(Device& dev, const Graph& g, const LlamaConfig& model,
                                const std::vector<ParamSpec>& specs, int64_t batch, int64_t seq_len,
                                const GraphOptions& options, const std::vector<int64_t>& numels) {
  std::vector<Tensor> inputs;
  inputs.push_back(Tensor::empty(dev, DType::i32, {batch, seq_len}, MemCategory::temporaries));
  inputs.push_back(Tensor::empty(dev, DType::i32, {batch, seq_len}, MemCategory::temporaries));
  for (int k = 0; k < 2; ++k) {
    inputs.push_back(
        Tensor::empty(dev, options.dtype, {seq_len, model.head_dim}, MemCategory::workspace));
  }
  // fp16: the loss scale, a () f32 input after the parameters (GraphOptions::loss_scaling).
  const auto loss_scale = [&] {
    if (options.loss_scaling)
      inputs.push_back(Tensor::empty(dev, DType::f32, {}, MemCategory::workspace));
  };
  const ZeroConfig& zero = options.grad_sync.zero;
  if (options.grad_sync.enabled() && zero.shards(ZeroSharded::parameters)) {
    // ZeRO-3: the graph takes this rank's shard of the parameters, and gathers them itself; the
    // pass that adds the shard input runs after the loss scale was added, so the shard is last.
    // Sharded experts stay inputs, whole (train/expert_params.h), before the loss scale.
    for (const ParamSpec& s : specs) {
      if (s.is_expert)
        inputs.push_back(Tensor::empty(dev, options.dtype, s.dims, MemCategory::weights));
    }
    loss_scale();
    const FlatLayout layout(numels, options.grad_sync.world_size);
    const int64_t shard = layout.held_numel(zero.stage, ZeroSharded::parameters);
    inputs.push_back(Tensor::empty(dev, DType::f32, {shard}, MemCategory::weights));
    return inputs;
  }
  for (const ParamSpec& s : specs)
    inputs.push_back(Tensor::empty(dev, options.dtype, s.dims, MemCategory::weights));
  loss_scale();
  // Mixed precision: the parameters' 16-bit copies (passes/master_weights), last, persistent
  // as TrainStep keeps them.
  for (ValueId in : g.inputs()) {
    if (low_weight_param_name(g.input_name(in)).empty()) continue;
    std::vector<int64_t> dims;
    LJ_CHECK(g.type(in).shape.eval(SymEnv(), &dims)) << "a weight copy of symbolic shape";
    inputs.push_back(Tensor::empty(dev, g.type(in).dtype, dims, MemCategory::weights));
  }
  return inputs;
}

// AdamW's m and v: whole per parameter, or this rank's shard of them (`sharded`).
std::vector<Tensor> adam_moments(Device& dev, const std::vector<ParamSpec>& specs,
                                 const DryRunOptions& dry, bool sharded, const ZeroMemory& zm) {
  std::vector<Tensor> moments;
  if (dry.with_adam_states && (!sharded || !dry.zero.shards(ZeroSharded::optimizer_states))) {
    for (int k = 0; k < 2; ++k) {
      for (const ParamSpec& s : specs)
        moments.push_back(Tensor::empty(dev, DType::f32, s.dims, MemCategory::optimizer));
    }
  } else if (sharded) {
    for (int k = 0; k < 2; ++k) {
      moments.push_back(
          Tensor::empty(dev, DType::f32, {zm.adam_state_numel}, MemCategory::optimizer));
    }
  }
  return moments;
}

// The MPI library's temporary of one collective (dist/zero.h): inside the MPI call, beside the
// bucket; freed by MPI, never in ljperf's cache.
void mpi_temporary(Device& dev, const DryRunOptions& dry, int64_t numel) {
  if (!dry.mpi_temporaries || numel <= 0) return;
  const auto bytes = static_cast<size_t>(numel) * sizeof(float);
  CachingAllocator& a = dev.allocator();
  a.deallocate_uncached(a.allocate_uncached(bytes, MemCategory::workspace), bytes,
                        MemCategory::workspace);
}

// With the gradient collectives in the graph, their buffers are in the dry run itself; what
// their kernels allocate by themselves is replayed where they run (train/grad_sync.h): each
// bucket's part of the gradient shard at its wait (into *grad_parts, by offset), and each
// collective's MPI temporary at its start (freed by the completion the next kernel's poll
// sees: Open MPI frees it there). Everything named must outlive the executor's dry run.
void replay_collectives(Executor& ex, const Graph& g, Device& dev, const DryRunOptions& dry,
                        const ZeroMemory& zm, std::map<int64_t, Tensor>* grad_parts) {
  // The hook outlives this call: it holds pointers to the caller's objects.
  ex.set_dry_node_hook([g = &g, dev = &dev, dry = &dry, zm = &zm, grad_parts](size_t ni) {
    const Node& n = g->nodes()[ni];
    if (n.op == Op::grad_reduce_wait && zm->grad_shard_numel > 0) {
      const int64_t count = n.attrs.i("recv_count");
      if (count > 0 && !grad_parts->count(n.attrs.i("recv_begin"))) {
        grad_parts->emplace(n.attrs.i("recv_begin"),
                            Tensor::empty_uncached(*dev, DType::f32, {count}, MemCategory::grads));
      }
    } else if (n.op == Op::grad_reduce_start) {
      const int64_t count = n.attrs.i("flat_end") - n.attrs.i("flat_begin");
      mpi_temporary(*dev, *dry,
                    zero_shards(static_cast<int>(n.attrs.i("stage")), ZeroSharded::gradients)
                        ? mpi_reduce_scatter_temporary_numel(count, dry->rank, dry->world_size)
                        : mpi_all_reduce_temporary_numel(count, dry->rank, dry->world_size));
    }
  });
}

// The optimizer step of one rank, after backward (dist/zero.h ZeroMemory's order). The trainer
// keeps only the gradients of backward's outputs (the loss is read and dropped).
void replay_sharded_optimizer(Device& dev, const DryRunOptions& dry, const ZeroMemory& zm,
                              bool in_graph, std::vector<Tensor>* outs,
                              std::map<int64_t, Tensor>* grad_parts) {
  outs->erase(outs->begin());
  const auto workspace = [&](int64_t n) {  // dist/zero.cc's buffers: transient
    return Tensor::empty_transient(dev, DType::f32, {std::max<int64_t>(n, 1)},
                                   MemCategory::workspace);
  };
  // Stage 2 without the collectives in the graph: step() takes the shard first.
  if (zm.grad_shard_numel > 0 && !in_graph) {
    grad_parts->emplace(
        0, Tensor::empty_uncached(dev, DType::f32, {zm.grad_shard_numel}, MemCategory::grads));
  }
  if (zm.reduce_buffer_numel > 0 && !in_graph) {
    Tensor bucket = workspace(zm.reduce_buffer_numel);
    const int64_t count = zm.reduce_buffer_numel;
    mpi_temporary(dev, dry,
                  zm.frees_full_grads
                      ? mpi_reduce_scatter_temporary_numel(count, dry.rank, dry.world_size)
                      : mpi_all_reduce_temporary_numel(count, dry.rank, dry.world_size));
  }
  if (zm.frees_full_grads) outs->clear();
  if (zm.gather_send_numel > 0) {
    Tensor send = workspace(zm.gather_send_numel);
    Tensor recv = workspace(zm.gather_recv_numel);
  }
  grad_parts->clear();  // freed at the end of the step
}

// The step's time: by this host's rates (AdamW over what this rank updates: its ZeRO shard, else
// every parameter), or by the device's time model.
Status add_step_time(const Graph& g, const SymEnv& env, const DryRunOptions& dry, bool sharded,
                     const ZeroMemory& zm, const std::vector<int64_t>& numels,
                     int64_t expert_states, GraphFigures* f) {
  if (dry.rates != nullptr) {
    if (dry.measure_gemm_classes)
      LJ_RETURN_IF_ERROR(add_gemm_classes(dry.rates, graph_gemm_shapes(g, env)));
    int64_t local = 0;
    if (dry.with_adam_states && sharded && dry.zero.shards(ZeroSharded::optimizer_states)) {
      local = zm.adam_state_numel;
    } else {
      for (int64_t n : numels) local += n;
    }
    local += expert_states;
    f->times = host_step_times(g, env, *dry.rates, local, dry.comm);
    if (dry.comm != nullptr && dry.world_size > 1 && sharded) {
      // Stages 1-2: the updated parameters all-gathered after the step, blocking.
      f->times->category[static_cast<size_t>(OpCategory::collective)] +=
          zero_param_gather_seconds(*dry.comm, dry.zero, zm.adam_state_numel);
    }
    f->compute_seconds = f->times->total();
  } else if (dry.device) {
    f->compute_seconds = graph_seconds(g, env, *dry.device, dry.eff);
    if (dry.device->kind == DeviceKind::gpu) f->gpu_work = gpu_step_work(g, env);
  }
  return ok_status();
}

// What the GEMMs hold beside the graph's buffers: whether one packs its operand, oneDNN's
// buffers on `dry.threads`; and the static plan of a planned run.
void add_gemm_buffers(const Graph& g, const Executor& ex, const DryRunOptions& dry,
                      GraphFigures* f) {
  for (const Node& n : g.nodes()) f->gemm_packing = f->gemm_packing || packs_gemm(g, n, ex.env());
  const int threads = dry.threads > 0 ? dry.threads : omp_get_max_threads();
  if (auto b = host_graph_sgemm_buffer_bytes(g, ex.env(), threads)) f->gemm_buffer_bytes = *b;
  if (const ArenaMemory* pm = ex.arena_memory()) f->plan = pm->plan();
}

}  // namespace

StatusOr<GraphFigures> graph_figures(const LlamaConfig& model, int64_t batch, int64_t seq_len,
                                     const GraphOptions& options, const DryRunOptions& dry) {
  Graph g;
  LJ_RETURN_IF_ERROR(build_train_graph(model, options, &g).status());
  return graph_figures(g, model, batch, seq_len, options, dry);
}

StatusOr<GraphFigures> graph_figures(const Graph& g, const LlamaConfig& model, int64_t batch,
                                     int64_t seq_len, const GraphOptions& options,
                                     const DryRunOptions& dry) {
  Device dev(1, /*is_virtual=*/true);
  // The rank's parameters: under expert parallelism its experts only, which form their own
  // data-parallel group over the W / N ranks that hold them (train/expert_params.h); the
  // world's ZeRO is the dense parameters'.
  const auto specs = llama_param_specs(model, options.experts);
  std::vector<ParamSpec> dense, experts;
  for (const ParamSpec& s : specs) (s.is_expert ? experts : dense).push_back(s);
  std::vector<int64_t> numels, expert_numels;
  for (const ParamSpec& s : dense) numels.push_back(numel_of(s.dims));
  for (const ParamSpec& s : experts) expert_numels.push_back(numel_of(s.dims));
  // Persistent state first, in the order the trainer allocates it: weights, then AdamW's m, v.
  const std::vector<Tensor> inputs =
      step_inputs(dev, g, model, specs, batch, seq_len, options, numels);
  const bool sharded = dry.with_adam_states && dry.world_size > 1;
  const ZeroMemory zm =
      sharded ? zero_memory(FlatLayout(numels, dry.world_size), dry.zero) : ZeroMemory{};
  const std::vector<Tensor> moments = adam_moments(dev, dense, dry, sharded, zm);
  // The experts' group: its ZeRO at stage 2 at most (their weights stay whole at stage 3).
  DryRunOptions group = dry;
  group.zero.stage = std::min(dry.zero.stage, 2);
  group.world_size = std::max(1, dry.world_size / options.experts.size);
  group.rank = dry.rank / options.experts.size;
  const ZeroMemory expert_zm =
      sharded && !experts.empty()
          ? zero_memory(FlatLayout(expert_numels, group.world_size), group.zero)
          : ZeroMemory{};
  const std::vector<Tensor> expert_moments =
      experts.empty() ? std::vector<Tensor>{}
                      : adam_moments(dev, experts, group, sharded, expert_zm);
  GraphFigures f;
  {
    // Compiled graphs run planned: the static memory plan's arena, as TrainStep runs them.
    Executor ex(g, dev,
                ExecutorOptions{
                    .planned = options.compile,
                    .dry_workspace_sizes = dry.cuda_workspace ? &cuda_workspace_sizes() : nullptr});
    const bool in_graph = options.grad_sync.enabled();
    std::map<int64_t, Tensor> grad_parts;  // train/zero_optimizer.h grad_part, by offset
    if (sharded && in_graph) replay_collectives(ex, g, dev, dry, zm, &grad_parts);
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ex.dry_run(inputs));
    // The experts' gradients ("grad:" outputs under expert parallelism) are their group's.
    std::vector<Tensor> expert_outs{Tensor()};  // replay_sharded_optimizer drops the first
    if (!experts.empty()) {
      std::vector<Tensor> rest;
      for (size_t k = 0; k < outs.size(); ++k) {
        const std::string& name = g.outputs()[k].name;
        const bool expert = name.rfind("grad:", 0) == 0 && is_expert_param(name.substr(5));
        (expert ? expert_outs : rest).push_back(std::move(outs[k]));
      }
      outs = std::move(rest);
    }
    if (sharded) replay_sharded_optimizer(dev, dry, zm, in_graph, &outs, &grad_parts);
    if (sharded && !experts.empty()) {
      // Reduced after backward, in the group's buffers (approximately: the run reduces both
      // groups before it updates either).
      std::map<int64_t, Tensor> expert_parts;
      replay_sharded_optimizer(dev, group, expert_zm, /*in_graph=*/false, &expert_outs,
                               &expert_parts);
    }
    f.stats = dev.memory();
    int64_t expert_states = 0;  // what AdamW updates of the experts on this rank
    for (int64_t n : expert_numels) expert_states += n;
    if (sharded && group.zero.shards(ZeroSharded::optimizer_states))
      expert_states = expert_zm.adam_state_numel;
    LJ_RETURN_IF_ERROR(add_step_time(g, ex.env(), dry, sharded, zm, numels, expert_states, &f));
    add_gemm_buffers(g, ex, dry, &f);
  }
  f.bytes_peak = f.stats.bytes_total_peak;
  f.bytes_reserved = f.stats.bytes_reserved_peak;
  f.nodes = static_cast<int64_t>(g.nodes().size());
  return f;
}

}  // namespace lj
