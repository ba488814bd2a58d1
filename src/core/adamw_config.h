// AdamW's hyper-parameters: the one type that holds them, from the flags (ljperf's defaults,
// the values below), a DeepSpeed JSON's optimizer block (io/deepspeed_config.h; DeepSpeed's own
// defaults are torch.optim.AdamW's, torch_defaults()) and read by the optimizer (train/adamw.h).
#pragma once

namespace lj {

struct AdamWConfig {
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;

  // torch.optim.AdamW's defaults, which DeepSpeed's optimizer block falls back to.
  static AdamWConfig torch_defaults() { return AdamWConfig{1e-3, 0.9, 0.999, 1e-8, 0.0}; }
};

}  // namespace lj
