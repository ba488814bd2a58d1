// Fuzz target: token files as `ljperf train --data` opens them (TokenFile::open on a path).
// The first input byte picks the format: 0 auto, 1 llm.c, 2 raw u16, 3 raw u32, 4 Megatron (the
// next two bytes give the .idx length, its bytes follow, the rest is the .bin); the rest is the
// file. Every token of an accepted file is read.
#include <unistd.h>

#include <algorithm>

#include "fuzz_util.h"
#include "io/tokens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string bin = lj::fuzz::scratch_dir() + "/tokens.bin";
  static const std::string idx = lj::fuzz::scratch_dir() + "/tokens.idx";
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 5;
  ++data, --size;
  ::unlink(idx.c_str());
  lj::TokenFormat format = lj::TokenFormat::auto_detect;
  switch (mode) {
    case 1:
      format = lj::TokenFormat::llmc;
      break;
    case 2:
      format = lj::TokenFormat::raw_u16;
      break;
    case 3:
      format = lj::TokenFormat::raw_u32;
      break;
    case 4: {
      if (size < 2) return 0;
      const size_t n = std::min<size_t>(size - 2, data[0] | (size_t{data[1]} << 8));
      lj::fuzz::write_file(idx, data + 2, n);
      data += 2 + n, size -= 2 + n;
      break;  // auto-detect finds the .idx, as it does for the CLI
    }
    default:
      break;
  }
  lj::fuzz::write_file(bin, data, size);
  auto t = lj::TokenFile::open(bin, format);
  if (!t.ok()) return 0;
  uint64_t sum = 0;
  for (int64_t i = 0; i < t->size(); ++i) sum += (*t)[i];
  if (t->size() > 0 && t->max_token() > sum) __builtin_trap();
  return 0;
}
