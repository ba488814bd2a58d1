#include "dist/consistency.h"

#include <cstdio>

namespace lj {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

Status check_same_on_all_ranks(Communicator& comm, const RunFingerprint& fp) {
  const int world = comm.world_size();
  // First the field count: the second exchange's size depends on it, and every rank must pass the
  // same size to a collective.
  LJ_ASSIGN_OR_RETURN(std::vector<double> counts,
                      all_gather_exact(comm, {static_cast<double>(fp.fields.size())}));
  for (int r = 1; r < world; ++r) {
    if (counts[static_cast<size_t>(r)] != counts[0]) {
      return invalid_argument(
          "rank " + std::to_string(r) + " checks " +
              std::to_string(static_cast<int64_t>(counts[static_cast<size_t>(r)])) +
              " settings, rank 0 " + std::to_string(static_cast<int64_t>(counts[0])),
          "run the same ljperf build and command on every rank");
    }
  }
  std::vector<double> mine;
  for (const auto& [name, value] : fp.fields) {
    uint64_t h = fnv1a64(name.data(), name.size());
    h = fnv1a64("=", 1, h);
    h = fnv1a64(value.data(), value.size(), h);
    mine.push_back(static_cast<double>(h >> 32));
    mine.push_back(static_cast<double>(h & 0xFFFFFFFFu));
  }
  LJ_ASSIGN_OR_RETURN(std::vector<double> all, all_gather_exact(comm, mine));
  const size_t n = mine.size();
  for (int r = 1; r < world; ++r) {
    for (size_t f = 0; f < fp.fields.size(); ++f) {
      const size_t a = 2 * f, b = static_cast<size_t>(r) * n + 2 * f;
      if (all[a] == all[b] && all[a + 1] == all[b + 1]) continue;
      const auto& [name, value] = fp.fields[f];
      // One line: a long or multi-line value (a model's config.json) is shown by its hash.
      std::string shown = value;
      if (value.size() > 100 || value.find('\n') != std::string::npos) {
        char buf[80];
        std::snprintf(buf, sizeof(buf), "a value of %zu bytes with FNV-1a %016llx", value.size(),
                      static_cast<unsigned long long>(fnv1a64(value.data(), value.size())));
        shown = buf;
      }
      return invalid_argument("rank " + std::to_string(r) + " disagrees with rank 0 on " + name +
                                  " (rank " + std::to_string(comm.rank()) + " has " + shown + ")",
                              "start every rank with the same command, model and data");
    }
  }
  return ok_status();
}

}  // namespace lj
