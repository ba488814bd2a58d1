// AdamW as PyTorch's torch.optim.AdamW computes it (decoupled weight decay, bias correction,
// fp32 states), applied on the host to fp32 parameters. Not yet a graph phase (DESIGN.md puts
// the optimizer in the graph; that comes with the compiled path).
#pragma once

#include <vector>

#include "runtime/tensor.h"

namespace lj {

struct AdamWConfig {
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  // Allocates m and v (zeros, counted as optimizer memory) for each parameter.
  AdamW(Device& dev, const std::vector<Tensor>& params, AdamWConfig config);
  // One step at learning rate `lr` (the schedule's value); grads match params.
  void step(std::vector<Tensor>& params, const std::vector<Tensor>& grads, double lr);
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
// Scales every gradient by `scale` in place.
void scale_grads(std::vector<Tensor>& grads, double scale, int threads);

}  // namespace lj
