// Refusing ranks that disagree, before any step. Every rank of a data-parallel run must train the
// same model on the same data with the same settings; a rank started with another --seq-len or
// another data file would otherwise train (and maybe deadlock) on its own. The caller lists what
// must match as named fields (the resolved config); each field is hashed (FNV-1a, 64 bit) and the
// hashes are exchanged, so only numbers travel and the values may be long.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"

namespace lj {

// What must be the same on every rank: (name, value) in a fixed order.
struct RunFingerprint {
  std::vector<std::pair<std::string, std::string>> fields;
  RunFingerprint& add(std::string name, std::string value) {
    fields.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  RunFingerprint& add(std::string name, int64_t value) {
    return add(std::move(name), std::to_string(value));
  }
};

// FNV-1a, 64 bit.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed = 14695981039346656037ull);

// Collective: every rank calls it. ok when all ranks hold equal fingerprints; otherwise every rank
// returns the same invalid_argument naming the first rank (in rank order) that differs from rank 0
// and the first field where it does, e.g. "rank 2 disagrees with rank 0 on seq_len (here: 64)".
// Two all-reduces of world_size x (1 + 2 x fields) doubles (32-bit halves: exact in a double).
Status check_same_on_all_ranks(Communicator& comm, const RunFingerprint& fingerprint);

}  // namespace lj
