// One HF-parity fixture of tools/ref/make_fixtures.py (tests/model/fixtures/<name>.safetensors):
// the model's config.json and training settings from the file's metadata, its tensors as f32,
// the batch in ljperf's (tokens, targets) form, and the initial weights copied into a TrainStep.
// Shared by the f32 parity test and the bf16 one (tools/ref/make_bf16_fixtures.py's files hold
// only losses and norms: they train from the weights and batch stored here).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/config.h"
#include "train/train_step.h"

namespace lj::testing_util {

class HfFixture {
 public:
  // Opens LJ_FIXTURE_DIR/<file>; a failure is a gtest failure and ok() false.
  explicit HfFixture(const std::string& file);
  bool ok() const { return file_ != nullptr; }
  const SafetensorsFile& file() const { return *file_; }
  const std::string& metadata(const std::string& key) const;

  // A tensor by name as f32 (I64 entries converted); empty (and a gtest failure) when missing.
  std::vector<float> read(const std::string& name) const;
  // tokens = input_ids (B, T); targets[t] = labels[t + 1] (HF shifts inside the loss), the
  // last position -100.
  void batch(Device& dev, Tensor* tokens, Tensor* targets) const;
  // Copies every parameter of `trainer` from the tensor of the same HF name.
  void load_params(TrainStep& trainer) const;

 private:
  std::unique_ptr<SafetensorsFile> file_;
};

// The model config (config_json) of a make_fixtures.py file.
LlamaConfig fixture_config(const HfFixture& f, const std::string& name);

}  // namespace lj::testing_util
