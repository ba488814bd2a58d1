// Fuzz target: a sharded checkpoint's manifest.json (parse_sharded_manifest, as
// load_checkpoint_for_rank reads it). What it accepts must hold what it promises: files inside
// the step folder, shards tiling [0, numel).
#include "fuzz_util.h"
#include "json_mutator.h"
#include "train/checkpoint_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = lj::parse_sharded_manifest(lj::fuzz::as_text(data, size), "manifest.json");
  if (!m.ok()) return 0;
  int64_t covered = 0;
  for (const lj::ManifestShard& s : m->optimizer_shards) {
    if (s.begin != covered || s.end <= s.begin || s.file.find('/') != std::string::npos)
      __builtin_trap();
    covered = s.end;
  }
  if (covered != m->numel || m->parameters.file.find('/') != std::string::npos) __builtin_trap();
  return 0;
}
