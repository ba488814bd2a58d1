// Fuzz target: a safetensors file as `ljperf` opens it (SafetensorsFile::open: mmap, then
// parse_safetensors validates the header against the file), then every tensor read as f32 the
// way a checkpoint or HF weights are loaded.
#include <vector>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lj::fuzz::scratch_dir() + "/model.safetensors";
  lj::fuzz::write_file(path, data, size);
  auto f = lj::SafetensorsFile::open(path);
  if (!f.ok()) return 0;
  std::vector<float> out;
  for (const lj::SafetensorsEntry& e : f->header().entries) {
    if (f->find(e.name) != &e) __builtin_trap();  // names are unique
    const auto bytes = f->bytes(e);
    out.resize(bytes.size() / static_cast<size_t>(e.dtype_size));
    (void)f->read_f32(e, out);  // an error for non-float dtypes is expected
  }
  return 0;
}
