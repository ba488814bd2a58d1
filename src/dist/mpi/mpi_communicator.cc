// dist/mpi_communicator.h over MPI (a build with MPI; dist/no_mpi/ answers without it).
#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/log.h"

namespace lj {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

Status mpi_status(int code, const char* what) {
  if (code == MPI_SUCCESS) return ok_status();
  return internal_error(std::string(what) + " failed: " + mpi_error_text(code),
                        "a peer process may have died; see its output");
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Status ensure_mpi_initialized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return internal_error("MPI was already finalised in this process");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return ok_status();
  int provided = 0;
  LJ_RETURN_IF_ERROR(
      mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init"));
  if (provided < MPI_THREAD_FUNNELED) {
    return internal_error("this MPI provides no MPI_THREAD_FUNNELED support (level " +
                          std::to_string(provided) + ")");
  }
  std::atexit(finalize_mpi);
  return ok_status();
}

// Polls `request` until it completes or `timeout_seconds` pass (<= 0: no limit); past the
// deadline prints one line and ends every rank (MPI_Abort on `comm`). The MPI return code.
int wait_or_abort(MPI_Request* request, MPI_Comm comm, int rank, const char* op,
                  double timeout_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    const int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    if (polls < 1000) continue;  // a short collective: no added latency
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (timeout_seconds > 0 && waited > timeout_seconds) {
      // Through core/log.h's error output: on a rank whose stderr is silenced (cli/dist_session.h)
      // that is its saved stderr, already labelled with the rank.
      std::fflush(stdout);
      write_rank_error_line(rank, collective_timeout_line(op, timeout_seconds));
      MPI_Abort(comm, 1);
      std::_Exit(1);
    }
    back_off_while_waiting(polls, waited);
  }
}

class MpiRequest final : public CommRequest {
 public:
  MpiRequest(MPI_Request request, const char* what, const char* op, MPI_Comm comm, int rank,
             double timeout_seconds, std::vector<int> counts = {})
      : counts_(std::move(counts)),
        request_(request),
        what_(what),
        op_(op),
        comm_(comm),
        rank_(rank),
        timeout_seconds_(timeout_seconds) {}
  ~MpiRequest() override { (void)wait(); }
  Status wait() override {
    if (request_ != MPI_REQUEST_NULL) {
      result_ = mpi_status(wait_or_abort(&request_, comm_, rank_, op_, timeout_seconds_), what_);
      request_ = MPI_REQUEST_NULL;
    }
    return result_;
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    const int rc = MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      result_ = mpi_status(rc, what_);
      request_ = MPI_REQUEST_NULL;
      return true;
    }
    return done != 0;
  }

 private:
  std::vector<int> counts_;  // a count array MPI may read until the collective completes
  MPI_Request request_;
  const char* what_;  // the MPI call, for errors
  const char* op_;    // the collective, for the timeout line
  MPI_Comm comm_;
  int rank_;
  double timeout_seconds_;
  Status result_;
};

// MPI counts are int: one collective moves at most INT_MAX elements (buckets keep below that).
StatusOr<int> mpi_count(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX)) {
    return invalid_argument(std::string(what) + " of " + std::to_string(n) +
                                " elements is above MPI's limit of 2^31 - 1",
                            "use smaller reduce_bucket_size / allgather_bucket_size");
  }
  return static_cast<int>(n);
}

#define LJ_COMM_COUNT(var, n, what)                         \
  StatusOr<int> var##_or = mpi_count((n), (what));          \
  if (!var##_or.ok()) return CommHandle(var##_or.status()); \
  const int var = *var##_or

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm, int rank, int world, int local, CommOptions options)
      : comm_(comm), rank_(rank), world_(world), local_(local), options_(options) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return local_; }
  const char* backend_name() const override { return "mpi"; }

  CommHandle iall_reduce_sum(std::span<const float> send, std::span<float> recv) override {
    return all_reduce(send.data(), recv.data(), send.size(), recv.size(), MPI_FLOAT);
  }
  CommHandle iall_reduce_sum(std::span<const double> send, std::span<double> recv) override {
    return all_reduce(send.data(), recv.data(), send.size(), recv.size(), MPI_DOUBLE);
  }
  CommHandle ireduce_scatter_sum(std::span<const float> send, std::span<float> recv) override {
    if (send.size() != recv.size() * static_cast<size_t>(world_)) {
      return CommHandle(invalid_argument("reduce_scatter: send has " + std::to_string(send.size()) +
                                         " elements, not world_size x recv (" +
                                         std::to_string(recv.size()) + ")"));
    }
    LJ_COMM_COUNT(n, recv.size(), "reduce_scatter");
    return started("MPI_Ireduce_scatter_block", "reduce_scatter", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, comm_, r);
    });
  }
  CommHandle ireduce_scatter_sum(std::span<const float> send, std::span<const int64_t> counts,
                                 std::span<float> recv) override {
    if (counts.size() != static_cast<size_t>(world_)) {
      return CommHandle(invalid_argument("reduce_scatter: " + std::to_string(counts.size()) +
                                         " counts for " + std::to_string(world_) + " ranks"));
    }
    std::vector<int> ints;
    size_t total = 0;
    for (int64_t c : counts) {
      LJ_COMM_COUNT(n, static_cast<size_t>(std::max<int64_t>(c, 0)), "reduce_scatter");
      ints.push_back(n);
      total += static_cast<size_t>(n);
    }
    if (send.size() != total ||
        recv.size() != static_cast<size_t>(ints[static_cast<size_t>(rank_)])) {
      return CommHandle(invalid_argument("reduce_scatter: send has " + std::to_string(send.size()) +
                                         " elements, recv " + std::to_string(recv.size()) +
                                         "; the counts sum to " + std::to_string(total)));
    }
    MPI_Request request = MPI_REQUEST_NULL;
    const void* in = send.data() == recv.data() ? MPI_IN_PLACE : send.data();
    const int rc =
        MPI_Ireduce_scatter(in, recv.data(), ints.data(), MPI_FLOAT, MPI_SUM, comm_, &request);
    if (rc != MPI_SUCCESS) return CommHandle(mpi_status(rc, "MPI_Ireduce_scatter"));
    return CommHandle(std::make_unique<MpiRequest>(request, "MPI_Ireduce_scatter", "reduce_scatter",
                                                   comm_, rank_, options_.timeout_seconds,
                                                   std::move(ints)));
  }
  CommHandle iall_gather(std::span<const float> send, std::span<float> recv) override {
    if (recv.size() != send.size() * static_cast<size_t>(world_)) {
      return CommHandle(invalid_argument("all_gather: recv has " + std::to_string(recv.size()) +
                                         " elements, not world_size x send (" +
                                         std::to_string(send.size()) + ")"));
    }
    LJ_COMM_COUNT(n, send.size(), "all_gather");
    return started("MPI_Iallgather", "all_gather", [&](MPI_Request* r) {
      return MPI_Iallgather(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, comm_, r);
    });
  }
  CommHandle iall_gather(std::span<const float> send, std::span<const int64_t> counts,
                         std::span<float> recv) override {
    if (counts.size() != static_cast<size_t>(world_)) {
      return CommHandle(invalid_argument("all_gather: " + std::to_string(counts.size()) +
                                         " counts for " + std::to_string(world_) + " ranks"));
    }
    // counts, then displacements: MPI may read both until the collective completes.
    std::vector<int> ints(2 * counts.size());
    size_t total = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      LJ_COMM_COUNT(n, static_cast<size_t>(std::max<int64_t>(counts[r], 0)), "all_gather");
      LJ_COMM_COUNT(at, total, "all_gather");
      ints[r] = n;
      ints[counts.size() + r] = at;
      total += static_cast<size_t>(n);
    }
    if (recv.size() != total ||
        send.size() != static_cast<size_t>(ints[static_cast<size_t>(rank_)])) {
      return CommHandle(invalid_argument("all_gather: send has " + std::to_string(send.size()) +
                                         " elements, recv " + std::to_string(recv.size()) +
                                         "; the counts sum to " + std::to_string(total)));
    }
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc =
        MPI_Iallgatherv(send.data(), ints[static_cast<size_t>(rank_)], MPI_FLOAT, recv.data(),
                        ints.data(), ints.data() + counts.size(), MPI_FLOAT, comm_, &request);
    if (rc != MPI_SUCCESS) return CommHandle(mpi_status(rc, "MPI_Iallgatherv"));
    return CommHandle(std::make_unique<MpiRequest>(request, "MPI_Iallgatherv", "all_gather", comm_,
                                                   rank_, options_.timeout_seconds,
                                                   std::move(ints)));
  }
  CommHandle ibroadcast(std::span<std::byte> data, int root) override {
    if (root < 0 || root >= world_) {
      return CommHandle(invalid_argument("broadcast from rank " + std::to_string(root) +
                                         " in a world of " + std::to_string(world_)));
    }
    LJ_COMM_COUNT(n, data.size(), "broadcast");
    return started("MPI_Ibcast", "broadcast", [&](MPI_Request* r) {
      return MPI_Ibcast(data.data(), n, MPI_BYTE, root, comm_, r);
    });
  }
  CommHandle ibarrier() override {
    return started("MPI_Ibarrier", "barrier",
                   [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }
  CommHandle iall_to_all(std::span<const float> send, std::span<const int64_t> send_counts,
                         std::span<float> recv, std::span<const int64_t> recv_counts) override {
    const size_t w = static_cast<size_t>(world_);
    if (send_counts.size() != w || recv_counts.size() != w) {
      return CommHandle(invalid_argument("all_to_all: " + std::to_string(send_counts.size()) +
                                         " send and " + std::to_string(recv_counts.size()) +
                                         " recv counts for " + std::to_string(world_) + " ranks"));
    }
    // send counts, send displacements, recv counts, recv displacements: MPI may read them until
    // the collective completes.
    std::vector<int> ints(4 * w);
    size_t sent = 0, received = 0;
    for (size_t r = 0; r < w; ++r) {
      LJ_COMM_COUNT(s, static_cast<size_t>(std::max<int64_t>(send_counts[r], 0)), "all_to_all");
      LJ_COMM_COUNT(s_at, sent, "all_to_all");
      LJ_COMM_COUNT(v, static_cast<size_t>(std::max<int64_t>(recv_counts[r], 0)), "all_to_all");
      LJ_COMM_COUNT(v_at, received, "all_to_all");
      ints[r] = s, ints[w + r] = s_at, ints[2 * w + r] = v, ints[3 * w + r] = v_at;
      sent += static_cast<size_t>(s), received += static_cast<size_t>(v);
    }
    if (send.size() != sent || recv.size() != received) {
      return CommHandle(invalid_argument("all_to_all: send has " + std::to_string(send.size()) +
                                         " elements, recv " + std::to_string(recv.size()) +
                                         "; the counts sum to " + std::to_string(sent) + " and " +
                                         std::to_string(received)));
    }
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc =
        MPI_Ialltoallv(send.data(), ints.data(), ints.data() + w, MPI_FLOAT, recv.data(),
                       ints.data() + 2 * w, ints.data() + 3 * w, MPI_FLOAT, comm_, &request);
    if (rc != MPI_SUCCESS) return CommHandle(mpi_status(rc, "MPI_Ialltoallv"));
    return CommHandle(std::make_unique<MpiRequest>(request, "MPI_Ialltoallv", "all_to_all", comm_,
                                                   rank_, options_.timeout_seconds,
                                                   std::move(ints)));
  }
  CommHandle iall_to_all(std::span<const int64_t> send, std::span<int64_t> recv) override {
    if (send.size() != recv.size() || send.size() % static_cast<size_t>(world_) != 0) {
      return CommHandle(invalid_argument("all_to_all: send has " + std::to_string(send.size()) +
                                         " elements, recv " + std::to_string(recv.size()) +
                                         "; both must be world_size equal blocks"));
    }
    LJ_COMM_COUNT(n, send.size() / static_cast<size_t>(world_), "all_to_all");
    return started("MPI_Ialltoall", "all_to_all", [&](MPI_Request* r) {
      return MPI_Ialltoall(send.data(), n, MPI_INT64_T, recv.data(), n, MPI_INT64_T, comm_, r);
    });
  }
  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override {
    if (color < 0) return invalid_argument("split: color must be >= 0");
    MPI_Comm sub = MPI_COMM_NULL;
    LJ_RETURN_IF_ERROR(mpi_status(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split"));
    LJ_RETURN_IF_ERROR(
        mpi_status(MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
    int rank = 0, world = 1;
    LJ_RETURN_IF_ERROR(mpi_status(MPI_Comm_rank(sub, &rank), "MPI_Comm_rank"));
    LJ_RETURN_IF_ERROR(mpi_status(MPI_Comm_size(sub, &world), "MPI_Comm_size"));
    // The local rank is the process's among its host's processes, whatever the group.
    return std::unique_ptr<Communicator>(
        std::make_unique<MpiCommunicator>(sub, rank, world, local_, options_));
  }
  void abort(int exit_code) override {
    MPI_Abort(comm_, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

 private:
  // Starts an MPI nonblocking call `start(&request)` and wraps its request.
  template <class Start>
  CommHandle started(const char* what, const char* op, Start start) {
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = start(&request);
    if (rc != MPI_SUCCESS) return CommHandle(mpi_status(rc, what));
    return CommHandle(
        std::make_unique<MpiRequest>(request, what, op, comm_, rank_, options_.timeout_seconds));
  }

  CommHandle all_reduce(const void* send, void* recv, size_t send_n, size_t recv_n,
                        MPI_Datatype type) {
    if (send_n != recv_n) {
      return CommHandle(invalid_argument("all_reduce: send has " + std::to_string(send_n) +
                                         " elements, recv " + std::to_string(recv_n)));
    }
    LJ_COMM_COUNT(n, recv_n, "all_reduce");
    const void* in = send == recv ? MPI_IN_PLACE : send;
    return started("MPI_Iallreduce", "all_reduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(in, recv, n, type, MPI_SUM, comm_, r);
    });
  }

  MPI_Comm comm_;
  int rank_, world_, local_;
  CommOptions options_;
};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> make_mpi_communicator(const CommEnvLookup& env,
                                                              const CommOptions& options) {
  LJ_RETURN_IF_ERROR(ensure_mpi_initialized());
  MPI_Comm comm = MPI_COMM_NULL;
  LJ_RETURN_IF_ERROR(mpi_status(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup"));
  // From here on a failure is a return code, not an abort.
  LJ_RETURN_IF_ERROR(
      mpi_status(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  int rank = 0, world = 1, local = 0;
  LJ_RETURN_IF_ERROR(mpi_status(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
  LJ_RETURN_IF_ERROR(mpi_status(MPI_Comm_size(comm, &world), "MPI_Comm_size"));
  MPI_Comm node = MPI_COMM_NULL;
  LJ_RETURN_IF_ERROR(
      mpi_status(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
                 "MPI_Comm_split_type"));
  const int rc = MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  LJ_RETURN_IF_ERROR(mpi_status(rc, "MPI_Comm_rank"));
  auto c = std::make_unique<MpiCommunicator>(comm, rank, world, local, options);
  LJ_RETURN_IF_ERROR(check_torchrun_vars(env, rank, world, local));
  return std::unique_ptr<Communicator>(std::move(c));
}

}  // namespace lj
