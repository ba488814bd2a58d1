#include "dist/expert_exchange.h"

#include <cstring>
#include <numeric>
#include <string>

namespace lj {

int64_t ExpertRoute::rows_out() const {
  return std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0});
}
int64_t ExpertRoute::rows_in() const {
  return std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
}

StatusOr<ExpertRoute> expert_route(int ranks, std::span<const int64_t> sizes,
                                   std::span<const int64_t> recv_sizes) {
  const int p = ranks;
  const auto experts = static_cast<int64_t>(sizes.size());
  if (p < 1 || experts == 0 || experts % p != 0) {
    return invalid_argument("expert parallelism: " + std::to_string(experts) +
                                " experts do not split over " + std::to_string(p) + " ranks",
                            "the expert-parallel size must divide the expert count");
  }
  if (recv_sizes.size() != sizes.size()) {
    return invalid_argument("expert parallelism: " + std::to_string(recv_sizes.size()) +
                            " received counts for " + std::to_string(experts) + " experts");
  }
  for (size_t e = 0; e < sizes.size(); ++e) {
    if (sizes[e] < 0 || recv_sizes[e] < 0) {
      return invalid_argument("expert parallelism: a negative group size");
    }
  }
  ExpertRoute r;
  r.ranks = p;
  r.local_experts = experts / p;
  const int64_t l_count = r.local_experts;
  r.send_rows.assign(static_cast<size_t>(p), 0);
  for (int64_t e = 0; e < experts; ++e) r.send_rows[static_cast<size_t>(e / l_count)] += sizes[e];
  r.recv_sizes.assign(recv_sizes.begin(), recv_sizes.end());
  r.recv_rows.assign(static_cast<size_t>(p), 0);
  r.group_sizes.assign(static_cast<size_t>(l_count), 0);
  for (int q = 0; q < p; ++q) {
    for (int64_t l = 0; l < l_count; ++l) {
      const int64_t n = r.recv_sizes[static_cast<size_t>(q * l_count + l)];
      r.recv_rows[static_cast<size_t>(q)] += n;
      r.group_sizes[static_cast<size_t>(l)] += n;
    }
  }
  return r;
}

StatusOr<ExpertRoute> plan_expert_route(Communicator& ep, std::span<const int64_t> sizes) {
  const int p = ep.world_size();
  const auto experts = static_cast<int64_t>(sizes.size());
  if (experts == 0 || experts % p != 0) return expert_route(p, sizes, sizes);  // its error
  for (int64_t s : sizes) {
    if (s < 0) return invalid_argument("expert parallelism: a negative group size");
  }
  std::vector<int64_t> recv(sizes.size(), 0);
  LJ_RETURN_IF_ERROR(ep.all_to_all(sizes, recv));
  return expert_route(p, sizes, recv);
}

ExpertExchange::ExpertExchange(Communicator& ep, const ExpertRoute& route, int64_t width)
    : ep_(ep), route_(route), width_(width) {}

std::vector<int64_t> ExpertExchange::elements(const std::vector<int64_t>& rows) const {
  std::vector<int64_t> n(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) n[i] = rows[i] * width_;
  return n;
}

void ExpertExchange::reorder(std::span<const float> from, std::span<float> to,
                             bool to_expert_major) const {
  const int64_t l_count = route_.local_experts;
  const auto p = static_cast<int64_t>(route_.ranks);
  // Where block (q, l) starts in each order, in rows.
  std::vector<int64_t> sender_major(static_cast<size_t>(p * l_count));
  std::vector<int64_t> expert_major(sender_major.size());
  int64_t at = 0;
  for (int64_t q = 0; q < p; ++q) {
    for (int64_t l = 0; l < l_count; ++l) {
      sender_major[static_cast<size_t>(q * l_count + l)] = at;
      at += route_.recv_sizes[static_cast<size_t>(q * l_count + l)];
    }
  }
  at = 0;
  for (int64_t l = 0; l < l_count; ++l) {
    for (int64_t q = 0; q < p; ++q) {
      expert_major[static_cast<size_t>(q * l_count + l)] = at;
      at += route_.recv_sizes[static_cast<size_t>(q * l_count + l)];
    }
  }
  for (size_t b = 0; b < sender_major.size(); ++b) {
    const int64_t src = to_expert_major ? sender_major[b] : expert_major[b];
    const int64_t dst = to_expert_major ? expert_major[b] : sender_major[b];
    const int64_t n = route_.recv_sizes[b] * width_;
    if (n > 0) {
      std::memcpy(to.data() + dst * width_, from.data() + src * width_,
                  static_cast<size_t>(n) * sizeof(float));
    }
  }
}

CommHandle ExpertExchange::start_dispatch(std::span<const float> rows, std::span<float> staging) {
  return ep_.iall_to_all(rows, elements(route_.send_rows), staging, elements(route_.recv_rows));
}

Status ExpertExchange::finish_dispatch(CommHandle& h, std::span<const float> staging,
                                       std::span<float> out) {
  LJ_RETURN_IF_ERROR(h.wait());
  if (out.size() != static_cast<size_t>(route_.rows_in() * width_) ||
      staging.size() != out.size()) {
    return invalid_argument("expert dispatch: the output holds " + std::to_string(out.size()) +
                            " elements, not " + std::to_string(route_.rows_in()) + " rows of " +
                            std::to_string(width_));
  }
  reorder(staging, out, /*to_expert_major=*/true);
  return ok_status();
}

CommHandle ExpertExchange::start_combine(std::span<const float> y, std::span<float> staging,
                                         std::span<float> rows) {
  const auto in = static_cast<size_t>(route_.rows_in() * width_);
  if (y.size() != in || staging.size() != in) {
    return CommHandle(invalid_argument("expert combine: y holds " + std::to_string(y.size()) +
                                       " elements, not " + std::to_string(route_.rows_in()) +
                                       " rows of " + std::to_string(width_)));
  }
  reorder(y, staging, /*to_expert_major=*/false);
  return ep_.iall_to_all(staging, elements(route_.recv_rows), rows, elements(route_.send_rows));
}

Status ExpertExchange::finish_combine(CommHandle& h) {
  return h.wait();
}

Status ExpertExchange::dispatch(std::span<const float> rows, std::span<float> staging,
                                std::span<float> out) {
  CommHandle h = start_dispatch(rows, staging);
  return finish_dispatch(h, staging, out);
}

Status ExpertExchange::combine(std::span<const float> y, std::span<float> staging,
                               std::span<float> rows) {
  CommHandle h = start_combine(y, staging, rows);
  return finish_combine(h);
}

}  // namespace lj
