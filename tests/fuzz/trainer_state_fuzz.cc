// Fuzz target: a checkpoint's trainer_state.json (parse_trainer_state, as load_checkpoint reads
// it); an accepted state must survive the round trip through trainer_state_json unchanged.
#include "fuzz_util.h"
#include "json_mutator.h"
#include "train/checkpoint_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto s = lj::parse_trainer_state(lj::fuzz::as_text(data, size), "trainer_state.json");
  if (!s.ok()) return 0;
  auto back = lj::parse_trainer_state(lj::trainer_state_json(*s), "round trip");
  if (!back.ok() || back->step != s->step || back->optimizer_steps != s->optimizer_steps ||
      back->data_position != s->data_position || back->skipped_steps != s->skipped_steps ||
      back->seed != s->seed || back->fingerprint != s->fingerprint ||
      back->loss_scale.has_value() != s->loss_scale.has_value() ||
      (s->loss_scale &&
       (back->loss_scale->scale != s->loss_scale->scale ||
        back->loss_scale->iter != s->loss_scale->iter ||
        back->loss_scale->last_overflow_iter != s->loss_scale->last_overflow_iter ||
        back->loss_scale->hysteresis_left != s->loss_scale->hysteresis_left ||
        back->loss_scale->overflows != s->loss_scale->overflows))) {
    __builtin_trap();
  }
  return 0;
}
