#include "plan/search.h"

#include <algorithm>
#include <map>

namespace lj {

MemoryPrediction lerp(const MemoryPrediction& a, const MemoryPrediction& b, double t) {
  MemoryPrediction r = a;
  for (size_t i = 0; i < r.items.size() && i < b.items.size(); ++i)
    r.items[i].bytes = a.items[i].bytes + t * (b.items[i].bytes - a.items[i].bytes);
  r.total = a.total + t * (b.total - a.total);
  return r;
}

namespace {

RecomputeConfig block(RecomputePolicy p, int64_t k) {
  RecomputeConfig rc;
  rc.policy = p;
  rc.method = RecomputeMethod::block;
  rc.layers = p == RecomputePolicy::none ? -1 : k;
  if (p == RecomputePolicy::none) rc.method = RecomputeMethod::uniform;
  return rc;
}

}  // namespace

StatusOr<std::vector<Candidate>> search_recompute(const SearchSpace& space, const CostFn& cost) {
  const int64_t L = space.num_layers;
  if (L <= 0 || space.micro_batches.empty())
    return invalid_argument("search: no layers or no micro-batch size");
  std::vector<Candidate> out;
  auto add = [&](RecomputePolicy p, int64_t k, int64_t b, const Pricing& c, bool exact) {
    Candidate cand;
    cand.recompute = block(p, k);
    cand.layers = p == RecomputePolicy::none ? 0 : k;
    cand.micro_batch = b;
    cand.memory = c.memory;
    cand.step_seconds = c.step_seconds;
    cand.tokens_per_s =
        c.step_seconds > 0 ? static_cast<double>(b * space.seq_len) / c.step_seconds : 0;
    cand.fits = c.memory.total <= space.budget_bytes;
    cand.exact = exact;
    out.push_back(std::move(cand));
  };
  for (int64_t b : space.micro_batches) {
    for (RecomputePolicy p : space.policies) {
      if (p == RecomputePolicy::none) {
        LJ_ASSIGN_OR_RETURN(Pricing c, cost(block(p, 0), b));
        add(p, 0, b, c, true);
        continue;
      }
      std::vector<int64_t> ks;
      if (space.pinned_layers >= 1) {
        ks = {space.pinned_layers};
      } else {
        for (int64_t k = 1; k <= L; ++k) ks.push_back(k);
      }
      std::map<int64_t, Pricing> priced;
      auto price = [&](int64_t k) -> Status {
        if (priced.count(k)) return ok_status();
        LJ_ASSIGN_OR_RETURN(Pricing c, cost(block(p, k), b));
        priced.emplace(k, std::move(c));
        return ok_status();
      };
      const bool exact_all = space.exhaustive || L <= kExactLayers || ks.size() == 1;
      for (int64_t k : ks) {
        const bool exact = exact_all || k <= 2 || k == L;
        if (exact) {
          LJ_RETURN_IF_ERROR(price(k));
          add(p, k, b, priced.at(k), true);
          continue;
        }
        LJ_RETURN_IF_ERROR(price(1));
        LJ_RETURN_IF_ERROR(price(2));
        const Pricing& c1 = priced.at(1);
        const Pricing& c2 = priced.at(2);
        const auto t = static_cast<double>(k - 1);
        Pricing c;
        c.memory = lerp(c1.memory, c2.memory, t);
        c.step_seconds = c1.step_seconds + t * (c2.step_seconds - c1.step_seconds);
        add(p, k, b, c, false);
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.fits != b.fits) return a.fits;
    if (!a.fits) return a.memory.total < b.memory.total;
    if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    return a.memory.total < b.memory.total;
  });
  return out;
}

}  // namespace lj
