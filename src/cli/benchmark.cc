// `ljperf benchmark`: trains a model on seeded synthetic tokens for a number of steps and
// reports throughput (tokens/s, TFLOP/s, MFU with torchtitan's FLOP convention), step-time
// percentiles and peak memory by category.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/cli.h"
#include "cli/report.h"
#include "core/random.h"
#include "core/units.h"
#include "runtime/host.h"
#include "train/train_step.h"

namespace lj::cli {
namespace {

struct BenchmarkArgs {
  std::string model = "small";
  int64_t batch_size = 4;
  int64_t seq_len = 256;
  int64_t steps = 12;
  int64_t warmup_steps = 2;
  int threads = 0;
  uint64_t seed = 1234;
  double lr = 3e-4;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// Seeded synthetic batch: uniform token ids; targets are the next tokens of the same stream.
void synthetic_batch(Device& dev, const BenchmarkArgs& a, int64_t vocab, int64_t step, Tensor* tokens,
                     Tensor* targets) {
  const std::vector<int64_t> dims{a.batch_size, a.seq_len};
  *tokens = Tensor::empty(dev, DType::i32, dims, MemCategory::temporaries);
  *targets = Tensor::empty(dev, DType::i32, dims, MemCategory::temporaries);
  int32_t* x = tokens->data<int32_t>();
  int32_t* y = targets->data<int32_t>();
  const uint64_t stream = a.seed ^ 0x5eedda7aull;
  for (int64_t b = 0; b < a.batch_size; ++b) {
    const uint64_t base = static_cast<uint64_t>((step * a.batch_size + b) * (a.seq_len + 1));
    for (int64_t t = 0; t < a.seq_len; ++t) {
      x[b * a.seq_len + t] = static_cast<int32_t>(random_bits(stream, base + t) % static_cast<uint64_t>(vocab));
      y[b * a.seq_len + t] = static_cast<int32_t>(random_bits(stream, base + t + 1) % static_cast<uint64_t>(vocab));
    }
  }
}

Status run_benchmark(const BenchmarkArgs& a) {
  if (a.steps <= 0) return invalid_argument("--steps must be positive, got " + std::to_string(a.steps));
  if (a.warmup_steps < 0 || a.warmup_steps >= a.steps) {
    return invalid_argument("--warmup-steps must be in [0, steps)", "e.g. --steps 12 --warmup-steps 2");
  }
  if (a.batch_size <= 0 || a.seq_len <= 0) return invalid_argument("--batch-size and --seq-len must be positive");
  LJ_ASSIGN_OR_RETURN(LlamaConfig model, llama_preset(a.model));
  Device dev(a.threads);
  const HostInfo host = host_info();
  TrainStepConfig tc;
  tc.seed = a.seed;
  tc.adamw.lr = a.lr;
  LJ_ASSIGN_OR_RETURN(auto trainer, TrainStep::create(model, tc, dev));

  const int64_t tokens_per_step = a.batch_size * a.seq_len;
  const double flops_per_token = model.flops_per_token(a.seq_len);
  const double peak = host.peak_fp32_flops();
  fmt::print("ljperf benchmark: model {} ({:.1f}M params), batch {} x seq {}, {} steps ({} warmup), {} threads\n",
             model.name, static_cast<double>(model.num_params()) / 1e6, a.batch_size, a.seq_len, a.steps,
             a.warmup_steps, dev.threads());
  fmt::print("host: {} ({} cores, {:.2f} GHz, fp32 peak {:.1f} GFLOP/s)\n", host.cpu_model, host.cores, host.ghz,
             peak / 1e9);

  std::vector<double> step_seconds;
  Tensor tokens, targets;
  for (int64_t s = 0; s < a.steps; ++s) {
    synthetic_batch(dev, a, model.vocab_size, s, &tokens, &targets);
    const double t0 = now_seconds();
    LJ_ASSIGN_OR_RETURN(StepResult r, trainer->step(tokens, targets, a.lr));
    const double dt = now_seconds() - t0;
    if (s >= a.warmup_steps) step_seconds.push_back(dt);
    const double tps = static_cast<double>(tokens_per_step) / dt;
    fmt::print(stderr, "{}{}\n",
               torchtitan_line(StepLine{s + 1, r.loss, r.grad_norm, static_cast<double>(dev.memory().bytes_total_peak),
                                        static_cast<double>(host.mem_total_bytes), tps, flops_per_token, peak}),
               s < a.warmup_steps ? "  (warmup)" : "");
  }
  const double p50 = percentile(step_seconds, 0.5), p90 = percentile(step_seconds, 0.9);
  const double tps = static_cast<double>(tokens_per_step) / p50;
  const double tflops = flops_per_token * tps / 1e12;
  fmt::print("\nsummary ({} measured steps; FLOPs per token = 6N + 12·L·H·Q·T = {:.3f} GFLOP, torchtitan's convention)\n",
             step_seconds.size(), flops_per_token / 1e9);
  fmt::print("  tokens/s      {:.0f}   (median step)\n", tps);
  fmt::print("  TFLOP/s       {:.4f}\n", tflops);
  fmt::print("  MFU           {:.2f}%   (of {:.1f} GFLOP/s fp32 peak)\n", 100.0 * tflops * 1e12 / peak, peak / 1e9);
  fmt::print("  step time     p50 {}   p90 {}\n", format_seconds(p50), format_seconds(p90));
  fmt::print("  kernels/step  {}\n", trainer->executor().kernels_launched());
  fmt::print("  memory (ljperf accounting)\n{}", dev.memory().to_string());
  return ok_status();
}

}  // namespace

Command add_benchmark_command(CLI::App& app) {
  auto args = std::make_shared<BenchmarkArgs>();
  CLI::App* sub = app.add_subcommand("benchmark", "Train on synthetic tokens and report throughput and memory");
  sub->add_option("--model", args->model, "Model preset (tiny, small, llama3.2-1b, ...)")->capture_default_str();
  sub->add_option("--batch-size", args->batch_size, "Micro-batch size")->capture_default_str();
  sub->add_option("--seq-len", args->seq_len, "Sequence length")->capture_default_str();
  sub->add_option("--steps", args->steps, "Steps to run, warmup included")->capture_default_str();
  sub->add_option("--warmup-steps", args->warmup_steps, "Steps excluded from the summary")->capture_default_str();
  sub->add_option("--threads", args->threads, "CPU threads (0: all)")->capture_default_str();
  sub->add_option("--seed", args->seed, "Seed for weights and data")->capture_default_str();
  sub->add_option("--lr", args->lr, "AdamW learning rate")->capture_default_str();
  return {sub, [args] { return run_benchmark(*args); }};
}

}  // namespace lj::cli
