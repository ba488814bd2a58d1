// Fuzz target: a Megatron .idx as `ljperf train --data X.bin` reads it (TokenFile::open on the
// .bin, which finds the X.idx beside it; megatron_token_width parses the index). The first input
// byte is the mode, the rest is the .idx:
//   bit 0: the .bin is synthesised from the index (its sequence lengths x the dtype's width, as
//          the index describes it; capped at 64 KiB) or, when set, holds the next byte's count of
//          bytes (any size, odd ones included);
//   bit 1: --data-format megatron instead of auto-detection;
//   bit 2: the index alone, as the data path too (a path without .bin names itself as its index).
// Every token of an accepted file is read.
#include <unistd.h>

#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "io/tokens.h"

namespace {

constexpr size_t kHeaderBytes = 34;
constexpr uint64_t kMaxBinBytes = 64 << 10;

// The .bin size that the index's lengths describe: sum(lengths) x width (0 when the header is
// not one of a known dtype; capped, so a hostile length cannot make the harness write gigabytes).
uint64_t described_bin_bytes(const uint8_t* idx, size_t size) {
  if (size < kHeaderBytes) return 0;
  const uint64_t width = idx[17] == 8 ? 2 : idx[17] == 4 ? 4 : 0;
  uint64_t sequences = 0;
  std::memcpy(&sequences, idx + 18, 8);
  const uint64_t fit = (size - kHeaderBytes) / 4;
  uint64_t total = 0;
  for (uint64_t i = 0; i < sequences && i < fit && total <= kMaxBinBytes; ++i) {
    int32_t len = 0;
    std::memcpy(&len, idx + kHeaderBytes + 4 * i, 4);
    if (len > 0) total += static_cast<uint64_t>(len) * width;
  }
  return total < kMaxBinBytes ? total : kMaxBinBytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string bin = lj::fuzz::scratch_dir() + "/tokens.bin";
  static const std::string idx = lj::fuzz::scratch_dir() + "/tokens.idx";
  static const std::string alone = lj::fuzz::scratch_dir() + "/tokens";
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  ++data, --size;
  const lj::TokenFormat format =
      (mode & 2) != 0 ? lj::TokenFormat::megatron : lj::TokenFormat::auto_detect;
  std::string path = bin;
  if ((mode & 4) != 0) {
    path = alone;
    lj::fuzz::write_file(alone, data, size);
  } else {
    uint64_t bin_bytes = 0;
    if ((mode & 1) != 0) {
      if (size < 1) return 0;
      bin_bytes = data[0];
      ++data, --size;
    } else {
      bin_bytes = described_bin_bytes(data, size);
    }
    std::vector<uint8_t> tokens(bin_bytes);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint8_t>(i * 31 + 7);
    lj::fuzz::write_file(idx, data, size);
    lj::fuzz::write_file(bin, tokens.data(), tokens.size());
  }
  auto t = lj::TokenFile::open(path, format);
  if (!t.ok()) return 0;
  if (t->token_bytes() != 2 && t->token_bytes() != 4) __builtin_trap();
  uint64_t sum = 0;
  for (int64_t i = 0; i < t->size(); ++i) sum += (*t)[i];
  if (t->size() > 0 && t->max_token() > sum) __builtin_trap();
  return 0;
}
