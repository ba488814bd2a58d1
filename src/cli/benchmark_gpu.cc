#include "cli/benchmark_gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "cli/mfu_peak.h"
#include "core/units.h"
#include "io/jsonl.h"
#include "plan/coefficients.h"
#include "plan/device_catalog.h"
#include "plan/plan.h"

namespace lj::cli {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Status run_gpu_benchmark(const GpuBenchmark& b) {
  const GpuRunConfig& cfg = b.run;
  const Communicator* comm = cfg.step.data_parallel.comm;
  const int world = comm != nullptr ? comm->world_size() : 1;
  fmt::print(
      "ljperf benchmark on the GPU: {} ({:.3f} B params), batch {} x seq {} x accum {}{}, {}{}\n",
      b.model_name, static_cast<double>(cfg.model.num_params()) / 1e9, cfg.batch, cfg.seq_len,
      cfg.grad_accum,
      comm != nullptr ? fmt::format(" x {} ranks (NCCL, ZeRO stage {})", world,
                                    cfg.step.data_parallel.zero.stage)
                      : "",
      cfg.step.graph.autocast == DType::bf16 ? "bf16 mixed precision" : "f32",
      cfg.step.graph.compile ? ", compiled" : ", eager");
  LJ_ASSIGN_OR_RETURN(const GpuRunResult r, run_on_gpu(cfg));
  const size_t skip = std::min(static_cast<size_t>(std::max<int64_t>(b.warmup, 0)),
                               r.step_seconds.size() > 0 ? r.step_seconds.size() - 1 : 0);
  const std::vector<double> measured(r.step_seconds.begin() + static_cast<long>(skip),
                                     r.step_seconds.end());
  const double step_s = median(measured);
  // Tokens of one step over every rank; the step time is this rank's (rank 0 prints).
  const double tokens = static_cast<double>(cfg.batch * cfg.seq_len * cfg.grad_accum * world);
  const double tps = step_s > 0 ? tokens / step_s : 0;
  const double flops_per_token = cfg.model.flops_per_token(cfg.seq_len);
  const double tflops = flops_per_token * tps / 1e12;
  const DeviceProfile* dev = gpu_catalog_entry(r.gpu.device_name);
  const double peak = dev != nullptr ? dev->peak_bf16_flops * world : 0;
  // The predictor's peak per GPU for this run (bf16 graph, the run's ZeRO over its ranks).
  double predicted = 0;
  if (dev != nullptr) {
    PlanRequest req;
    req.model = cfg.model;
    req.device = *dev;
    req.coeffs = default_coefficients();
    req.gpus = world;
    req.zero = cfg.step.data_parallel.zero;
    req.micro_batch = cfg.batch;
    req.seq_len = cfg.seq_len;
    req.compile = cfg.step.graph.compile;
    auto p = price_choice(req, cfg.step.graph.recompute, cfg.batch);
    if (p.ok()) predicted = p->memory.total;
  }
  fmt::print("  device        {} ({}, {})\n", r.gpu.device_name, r.gpu.arch,
             format_bytes(static_cast<double>(r.gpu.device_memory_bytes)));
  fmt::print("  setup         {:.2f} s (graph, weights, {} fused kernels via NVRTC)\n",
             r.gpu.setup_seconds, r.gpu.fused_kernels);
  fmt::print("  loss          {:.4f} -> {:.4f} over {} steps\n",
             r.losses.empty() ? 0.0 : r.losses.front(), r.losses.empty() ? 0.0 : r.losses.back(),
             r.losses.size());
  fmt::print("  step time     {:.2f} ms (median of {} steps after {} warmup), {} kernels a step\n",
             step_s * 1e3, measured.size(), skip, r.gpu.kernels_per_step);
  if (r.gpu.cuda_graphs) {
    fmt::print("  CUDA graphs   {} of {} steps replayed{}\n", r.gpu.graph_replays, r.losses.size(),
               r.gpu.graph_replays == 0 ? " (the capture failed: see the warning above)" : "");
  }
  if (comm != nullptr) {
    const size_t n = r.comm_exposed_seconds.size();
    const std::vector<double> exposed(r.comm_exposed_seconds.begin() + static_cast<long>(skip),
                                      r.comm_exposed_seconds.begin() + static_cast<long>(n));
    fmt::print(
        "  NCCL          {:.2f} ms a step waiting on gradient all-reduces ({})\n",
        median(exposed) * 1e3,
        cfg.step.data_parallel.zero.overlap_comm ? "overlapped with backward" : "after backward");
  }
  fmt::print("  tokens/s      {:.0f}{}\n", tps, world > 1 ? " (all ranks)" : "");
  fmt::print("  TFLOP/s       {:.2f}   ({:.3g} GFLOP/token, 6N+12LHQT)\n", tflops,
             flops_per_token / 1e9);
  if (peak > 0) {
    fmt::print("  MFU           {:.1f}%  of {:.0f} TFLOP/s dense bf16 ({})\n",
               100.0 * tflops * 1e12 / peak, peak / 1e12, dev->name);
  } else {
    fmt::print("  MFU           n/a (no catalog entry for {})\n", r.gpu.device_name);
  }
  fmt::print("  peak memory   {} reserved by the allocator ({} in use), {} used on the device\n",
             format_bytes(static_cast<double>(r.gpu.bytes_reserved_peak)),
             format_bytes(static_cast<double>(r.gpu.bytes_in_use_peak)),
             format_bytes(static_cast<double>(r.gpu.bytes_device_used)));
  if (predicted > 0) {
    const double err = 100.0 * (predicted - static_cast<double>(r.gpu.bytes_device_used)) /
                       static_cast<double>(std::max<int64_t>(r.gpu.bytes_device_used, 1));
    fmt::print("  predicted     {} ({:+.1f}% against the device's used bytes)\n",
               format_bytes(predicted), err);
  }
  if (b.output.empty()) return ok_status();
  nlohmann::json j = {{"command", "benchmark"},
                      {"device", "cuda"},
                      {"gpu", r.gpu.device_name},
                      {"arch", r.gpu.arch},
                      {"model", b.model_name},
                      {"params", cfg.model.num_params()},
                      {"precision", cfg.step.graph.autocast == DType::bf16 ? "bf16" : "f32"},
                      {"compile", cfg.step.graph.compile},
                      {"batch_size", cfg.batch},
                      {"grad_accum", cfg.grad_accum},
                      {"world_size", world},
                      {"zero_stage", cfg.step.data_parallel.zero.stage},
                      {"seq_len", cfg.seq_len},
                      {"steps", cfg.steps},
                      {"warmup_steps", skip},
                      {"step_time_ms", step_s * 1e3},
                      {"tokens_per_s", tps},
                      {"tflops", tflops},
                      {"mfu", peak > 0 ? tflops * 1e12 / peak : 0.0},
                      {"peak_flops", peak},
                      {"flops_per_token", flops_per_token},
                      {"losses", r.losses},
                      {"bytes_reserved_peak", r.gpu.bytes_reserved_peak},
                      {"bytes_in_use_peak", r.gpu.bytes_in_use_peak},
                      {"bytes_device_used", r.gpu.bytes_device_used},
                      {"bytes_predicted", predicted},
                      {"setup_s", r.gpu.setup_seconds},
                      {"cuda_graph_replays", r.gpu.graph_replays}};
  // As the CPU route appends: whole lines only, fsynced (io/jsonl.h).
  LJ_ASSIGN_OR_RETURN(JsonlWriter w, JsonlWriter::open(b.output, /*append=*/true));
  LJ_RETURN_IF_ERROR(w.write(j.dump()));
  return w.flush();
}

}  // namespace lj::cli
