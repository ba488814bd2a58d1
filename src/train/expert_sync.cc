#include "train/expert_sync.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/check.h"
#include "dist/expert_exchange.h"

namespace lj {
namespace {

// The sizes as int64 (an i32 or i64 tensor).
std::vector<int64_t> sizes_of(const TensorView& t) {
  std::vector<int64_t> s(static_cast<size_t>(t.numel()));
  for (size_t e = 0; e < s.size(); ++e) {
    s[e] = t.dtype == DType::i64 ? t.as<int64_t>()[e] : static_cast<int64_t>(t.as<int32_t>()[e]);
  }
  return s;
}

// The rows' width in 4-byte words: the exchange moves f32 rows as they are, and 16-bit rows
// (bf16, fp16 under autocast) of an even width two elements to a word, so the bits arrive
// unchanged (MPI copies a predefined type's bytes between ranks of one architecture).
StatusOr<int64_t> row_words(const KernelContext& c, const TensorView& rows) {
  const int64_t bytes = rows.dims[1] * static_cast<int64_t>(dtype_size(rows.dtype));
  if (bytes % 4 != 0) {
    return unimplemented(c.node.scope + ": expert parallelism over rows of " +
                             std::to_string(rows.dims[1]) + " " + dtype_name(rows.dtype) +
                             " elements (an odd width of a 16-bit type)",
                         "use --precision f32 with this model, or drop --expert-parallel");
  }
  return bytes / 4;
}

}  // namespace

ExpertSync::ExpertSync(const Graph& g, Executor& ex, Communicator& ep) : ep_(ep) {
  if (const char* at = std::getenv("LJ_TEST_KILL_AT"); at != nullptr) {
    long long n = 0;
    int r = -1;
    if (std::sscanf(at, "dispatch:%lld:%d", &n, &r) == 2 && r == ep.rank()) kill_at_ = n;
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::ep_route && n.op != Op::ep_dispatch && n.op != Op::ep_combine) continue;
    LJ_CHECK_EQ(n.attrs.i("ranks"), ep.world_size())
        << n.scope << ": the graph's expert-parallel size is not the group's";
    ++nodes_;
    if (n.op == Op::ep_route) {
      ex.set_node_kernel(i, [this](KernelContext& c) { return route(c); });
    } else if (n.op == Op::ep_dispatch) {
      ex.set_node_kernel(i, [this](KernelContext& c) { return dispatch(c); });
    } else {
      ex.set_node_kernel(i, [this](KernelContext& c) { return combine(c); });
    }
  }
}

Status ExpertSync::route(KernelContext& c) {
  const std::vector<int64_t> sizes = sizes_of(c.in[0]);
  std::vector<int64_t> recv(sizes.size(), 0);
  LJ_RETURN_IF_ERROR(ep_.all_to_all(sizes, recv).with_context(c.node.scope));
  LJ_ASSIGN_OR_RETURN(const ExpertRoute r, expert_route(ep_.world_size(), sizes, recv));
  for (size_t e = 0; e < recv.size(); ++e)
    c.out[0].as<int32_t>()[e] = static_cast<int32_t>(recv[e]);
  for (size_t l = 0; l < r.group_sizes.size(); ++l) {
    c.out[1].as<int32_t>()[l] = static_cast<int32_t>(r.group_sizes[l]);
  }
  return ok_status();
}

Status ExpertSync::dispatch(KernelContext& c) {
  LJ_ASSIGN_OR_RETURN(const ExpertRoute r,
                      expert_route(ep_.world_size(), sizes_of(c.in[1]), sizes_of(c.in[2])));
  LJ_ASSIGN_OR_RETURN(const int64_t w, row_words(c, c.in[0]));
  const int64_t m = c.in[0].dims[0], cap = c.out[0].dims[0];
  const int64_t got = r.rows_in();
  if (r.rows_out() != m || got > cap) {
    return out_of_range(c.node.scope + ": ep_dispatch routes " + std::to_string(r.rows_out()) +
                            " of " + std::to_string(m) + " rows and receives " +
                            std::to_string(got) + " of at most " + std::to_string(cap),
                        "group_sizes must come from moe_sort and recv_sizes from ep_route");
  }
  staging_.resize(static_cast<size_t>(got * w));
  if (++dispatches_ == kill_at_) std::raise(SIGKILL);
  float* out = c.out[0].as<float>();
  ExpertExchange x(ep_, r, w);
  LJ_RETURN_IF_ERROR(
      x.dispatch(std::span<const float>(c.in[0].as<float>(), static_cast<size_t>(m * w)), staging_,
                 std::span<float>(out, static_cast<size_t>(got * w)))
          .with_context(c.node.scope));
  std::memset(out + got * w, 0, static_cast<size_t>((cap - got) * w) * sizeof(float));
  return ok_status();
}

Status ExpertSync::combine(KernelContext& c) {
  LJ_ASSIGN_OR_RETURN(const ExpertRoute r,
                      expert_route(ep_.world_size(), sizes_of(c.in[1]), sizes_of(c.in[2])));
  LJ_ASSIGN_OR_RETURN(const int64_t w, row_words(c, c.in[0]));
  const int64_t m = c.out[0].dims[0], cap = c.in[0].dims[0];
  const int64_t got = r.rows_in();
  if (r.rows_out() != m || got > cap) {
    return out_of_range(c.node.scope + ": ep_combine returns " + std::to_string(r.rows_out()) +
                            " of " + std::to_string(m) + " rows from " + std::to_string(got) +
                            " of at most " + std::to_string(cap),
                        "group_sizes must come from moe_sort and recv_sizes from ep_route");
  }
  staging_.resize(static_cast<size_t>(got * w));
  ExpertExchange x(ep_, r, w);
  return x
      .combine(std::span<const float>(c.in[0].as<float>(), static_cast<size_t>(got * w)), staging_,
               std::span<float>(c.out[0].as<float>(), static_cast<size_t>(m * w)))
      .with_context(c.node.scope);
}

}  // namespace lj
