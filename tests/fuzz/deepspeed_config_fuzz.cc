// Fuzz target: a DeepSpeed JSON (--deepspeed ds.json: load_deepspeed_config reads the file, then
// parse_deepspeed_config resolves it against the run), for a two-rank run of a 4096-wide model
// so that the batch arithmetic and the "auto" bucket sizes are exercised; then describe().
#include "fuzz_util.h"
#include "io/deepspeed_config.h"
#include "json_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lj::RunSettings run;
  run.world_size = 2;
  run.hidden_size = 4096;
  run.total_steps = 1000;
  auto c = lj::parse_deepspeed_config(lj::fuzz::as_text(data, size), "ds.json", run);
  if (c.ok()) (void)c->describe();
  return 0;
}
