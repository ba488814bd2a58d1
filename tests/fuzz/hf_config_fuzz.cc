// Fuzz target: a model's config.json (load_hf_config reads the file, then parse_hf_config); an
// accepted config is written back as transformers would read it.
#include "fuzz_util.h"
#include "json_mutator.h"
#include "models/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = lj::parse_hf_config(lj::fuzz::as_text(data, size), "config.json");
  if (c.ok()) (void)lj::hf_config_json(*c);
  return 0;
}
