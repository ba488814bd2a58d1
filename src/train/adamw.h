// AdamW as PyTorch's torch.optim.AdamW computes it (decoupled weight decay, bias correction,
// fp32 states), applied on the host to fp32 parameters, one fused pass per parameter. Not yet a
// graph phase (it runs after the executor: docs/architecture.md, "The pipeline"); the trainer times
// it as the optimizer phase (StepResult::optimizer_seconds, the benchmark's --profile row).
#pragma once

#include <vector>

#include "backends/cpu/adamw_kernel.h"
#include "core/adamw_config.h"
#include "runtime/tensor.h"

namespace lj {

// Writes the 16-bit copies of `params` (f32) into `low` (matching, undefined where a parameter
// has none): what adamw_update writes, for parameters that changed outside it (init, a load).
void write_low_copies(const std::vector<Tensor>& params, std::vector<Tensor>& low, int threads);

class AdamW {
 public:
  // Allocates m and v (zeros, counted as optimizer memory) for each parameter.
  AdamW(Device& dev, const std::vector<Tensor>& params, AdamWConfig config);
  // States of the given sizes instead, one flat m and v each (a ZeRO shard of the parameters:
  // the caller maps them onto parameters and applies adamw_update itself).
  AdamW(Device& dev, const std::vector<int64_t>& state_numels, AdamWConfig config);
  // One step at learning rate `lr` (the schedule's value); grads match params and are read as
  // grads * grad_scale (clipping folded into the update; the grads are not written).
  // `low` (optional): the parameters' 16-bit copies, written in the same pass (undefined
  // tensors where a parameter has none).
  void step(std::vector<Tensor>& params, const std::vector<Tensor>& grads, double lr,
            double grad_scale = 1.0, std::vector<Tensor>* low = nullptr);
  // For callers that update ranges themselves: counts a step and returns its constants at `lr`.
  AdamWStepConstants begin_step(double lr);
  int threads() const { return threads_; }
  int64_t steps() const { return step_; }
  const AdamWConfig& config() const { return config_; }
  std::vector<Tensor>& m() { return m_; }
  std::vector<Tensor>& v() { return v_; }
  void set_steps(int64_t s) { step_ = s; }

 private:
  AdamWConfig config_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
  int threads_;
};

// Global L2 norm of all gradients (f32 data, summed in f64 in a fixed order).
double global_grad_norm(const std::vector<Tensor>& grads, int threads);
// Adds the squares of g[0, n) to *sum in f64, in fixed chunks (each as 32 interleaved partial
// sums combined pairwise) summed in order: the result depends on (g, n) only, not on the threads.
// global_grad_norm is this over each gradient in turn.
void accumulate_squares(const float* g, int64_t n, int threads, double* sum);
// Scales every gradient by `scale` in place.
void scale_grads(std::vector<Tensor>& grads, double scale, int threads);

}  // namespace lj
