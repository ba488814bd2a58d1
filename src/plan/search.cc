#include "plan/search.h"

#include <algorithm>
#include <cmath>
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
    cand.fits = fits(c.memory.total, space.budget_bytes, space.safety_margin);
    cand.exact = exact;
    if (exact) {
      cand.times = c.times;
      cand.gpu_work = c.gpu_work;
    }
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
      if (exact_all) {
        for (int64_t k : ks) {
          LJ_RETURN_IF_ERROR(price(k));
          add(p, k, b, priced.at(k), true);
        }
        continue;
      }
      // Adaptive: exact at both ends of [lo, hi] and at the middle; where the middle is on the
      // chord (within kInterpolationTolerance, memory and time) the interval is taken as linear,
      // otherwise both halves are refined. Memory over k is a maximum of per-phase linear
      // functions, so a middle point on the chord means no kink inside.
      std::vector<std::pair<int64_t, int64_t>> linear;  // intervals taken as linear
      std::vector<std::pair<int64_t, int64_t>> todo{{1, L}};
      LJ_RETURN_IF_ERROR(price(1));
      LJ_RETURN_IF_ERROR(price(L));
      while (!todo.empty()) {
        const auto [lo, hi] = todo.back();
        todo.pop_back();
        if (hi - lo < 2) continue;
        const int64_t mid = (lo + hi) / 2;
        LJ_RETURN_IF_ERROR(price(mid));
        const Pricing& a = priced.at(lo);
        const Pricing& z = priced.at(hi);
        const Pricing& m = priced.at(mid);
        const double t = static_cast<double>(mid - lo) / static_cast<double>(hi - lo);
        const double mem = a.memory.total + t * (z.memory.total - a.memory.total);
        const double sec = a.step_seconds + t * (z.step_seconds - a.step_seconds);
        if (std::fabs(mem - m.memory.total) <= kInterpolationTolerance * m.memory.total &&
            std::fabs(sec - m.step_seconds) <= kInterpolationTolerance * m.step_seconds) {
          linear.emplace_back(lo, hi);
        } else {
          todo.emplace_back(lo, mid);
          todo.emplace_back(mid, hi);
        }
      }
      for (int64_t k : ks) {
        if (priced.count(k)) {
          add(p, k, b, priced.at(k), true);
          continue;
        }
        for (const auto& [lo, hi] : linear) {
          if (k <= lo || k >= hi) continue;
          const Pricing& a = priced.at(lo);
          const Pricing& z = priced.at(hi);
          const double t = static_cast<double>(k - lo) / static_cast<double>(hi - lo);
          Pricing c;
          c.memory = lerp(a.memory, z.memory, t);
          c.step_seconds = a.step_seconds + t * (z.step_seconds - a.step_seconds);
          add(p, k, b, c, false);
          break;
        }
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
