#include "model/hf_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "models/hf_config.h"

namespace lj::testing_util {

HfFixture::HfFixture(const std::string& file) {
  auto f = SafetensorsFile::open(std::string(LJ_FIXTURE_DIR) + "/" + file);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  if (f.ok()) file_ = std::make_unique<SafetensorsFile>(std::move(f).value());
}

const std::string& HfFixture::metadata(const std::string& key) const {
  return file_->header().metadata.at(key);
}

std::vector<float> HfFixture::read(const std::string& name) const {
  const SafetensorsEntry* e = file_->find(name);
  EXPECT_NE(e, nullptr) << name;
  if (e == nullptr) return {};
  int64_t n = 1;
  for (int64_t d : e->shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  if (e->dtype_name == "I64") {
    const auto bytes = file_->bytes(*e);
    for (int64_t i = 0; i < n; ++i) {
      int64_t x;
      std::memcpy(&x, bytes.data() + 8 * i, 8);
      v[static_cast<size_t>(i)] = static_cast<float>(x);
    }
    return v;
  }
  EXPECT_TRUE(file_->read_f32(*e, v).ok());
  return v;
}

void HfFixture::batch(Device& dev, Tensor* tokens, Tensor* targets) const {
  const SafetensorsEntry* e = file_->find("input_ids");
  ASSERT_NE(e, nullptr);
  const int64_t B = e->shape[0], T = e->shape[1];
  const auto ids = read("input_ids"), labels = read("labels");
  *tokens = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
  *targets = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const auto i = static_cast<size_t>(b * T + t);
      tokens->data<int32_t>()[i] = static_cast<int32_t>(ids[i]);
      targets->data<int32_t>()[i] = t + 1 < T ? static_cast<int32_t>(labels[i + 1]) : -100;
    }
  }
}

void HfFixture::load_params(TrainStep& trainer) const {
  const auto& specs = trainer.param_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto w = read(specs[i].name);
    EXPECT_EQ(static_cast<int64_t>(w.size()), trainer.params()[i].numel()) << specs[i].name;
    if (static_cast<int64_t>(w.size()) != trainer.params()[i].numel()) continue;
    std::copy(w.begin(), w.end(), trainer.params()[i].data<float>());
  }
}

LlamaConfig fixture_config(const HfFixture& f, const std::string& name) {
  auto cfg = parse_hf_config(f.metadata("config_json"), name);
  EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
  return cfg.ok() ? *cfg : LlamaConfig{};
}

}  // namespace lj::testing_util
