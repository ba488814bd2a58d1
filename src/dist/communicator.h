// Collective communication between the processes of a data-parallel run (docs/architecture.md,
// "Distributed training"). One Communicator per process; every rank must call the same collectives
// in the same order with the same counts (MPI's rule). Collectives are nonblocking: each returns a
// CommHandle that completes it; the buffers must stay alive and untouched until then. The
// blocking forms (no `i` prefix) start the collective and wait.
//
// Implementations: SelfCommunicator (one process, no MPI; collectives are copies) and the MPI one
// (dist/mpi_communicator.h). Errors are Status values, never aborts: a dead peer or a bad count
// reaches the caller, and the CLI prints it. The one exception is a collective that never
// completes (a peer hangs, or died without MPI noticing): past CommOptions::timeout_seconds the
// MPI communicator prints one line naming the rank, the operation and the timeout and ends every
// rank (MPI_Abort), so a run never hangs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace lj {

// The implementation side of a CommHandle: one in-flight collective.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  // Blocks until the collective completes; its result.
  virtual Status wait() = 0;
  // Whether it has completed, without blocking (a failed collective has completed).
  virtual bool test() = 0;
};

// Completion of a nonblocking collective. Move-only; a default-constructed handle is complete and
// ok. Dropping an unfinished handle waits for it (the buffers may not be reused before).
class CommHandle {
 public:
  CommHandle() = default;
  explicit CommHandle(Status done) : status_(std::move(done)) {}
  explicit CommHandle(std::unique_ptr<CommRequest> request) : request_(std::move(request)) {}
  CommHandle(CommHandle&&) = default;
  CommHandle& operator=(CommHandle&& other);
  ~CommHandle();

  // Blocks until complete; the collective's status. Calling it again returns the same status.
  Status wait();
  // true when complete (wait() then returns at once).
  bool test();

 private:
  std::unique_ptr<CommRequest> request_;
  Status status_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;            // rank among the processes of this host
  virtual const char* backend_name() const = 0;  // "self", "mpi"

  // ---- Nonblocking. `send` and `recv` may be the same buffer (in place). ----
  // recv[i] = sum over ranks of send[i]; sizes equal.
  virtual CommHandle iall_reduce_sum(std::span<const float> send, std::span<float> recv) = 0;
  virtual CommHandle iall_reduce_sum(std::span<const double> send, std::span<double> recv) = 0;
  // send: world_size blocks of recv.size() elements; recv = sum over ranks of their block rank().
  // In place is not allowed here (the sizes differ).
  virtual CommHandle ireduce_scatter_sum(std::span<const float> send, std::span<float> recv) = 0;
  // Uneven blocks: send holds counts[0] + ... + counts[N-1] elements, block r (counts[r] of them,
  // possibly 0) summed over ranks goes to rank r; recv.size() == counts[rank()]. In place when
  // recv starts where send starts (MPI_IN_PLACE: the result overwrites the start of send).
  virtual CommHandle ireduce_scatter_sum(std::span<const float> send,
                                         std::span<const int64_t> counts,
                                         std::span<float> recv) = 0;
  // recv: world_size blocks of send.size() elements, block r = rank r's send. Not in place.
  virtual CommHandle iall_gather(std::span<const float> send, std::span<float> recv) = 0;
  // Uneven blocks: rank r sends counts[r] elements (possibly 0; send.size() == counts[rank()]);
  // recv holds the ranks' blocks in rank order, counts[0] + ... + counts[N-1] elements.
  virtual CommHandle iall_gather(std::span<const float> send, std::span<const int64_t> counts,
                                 std::span<float> recv) = 0;
  // `data` on every rank becomes root's.
  virtual CommHandle ibroadcast(std::span<std::byte> data, int root) = 0;
  virtual CommHandle ibarrier() = 0;
  // All-to-all with uneven blocks (MPI_Ialltoallv; expert parallelism's token exchange): send
  // holds world_size blocks in rank order, block r (send_counts[r] elements, possibly 0) goes to
  // rank r; recv receives rank q's block for this rank at the offset of recv_counts[0 .. q),
  // recv_counts[q] elements. Each rank's recv_counts[q] must equal rank q's send_counts[rank()]
  // (exchange them first with the even form below). Not in place. The base answers
  // unimplemented (the NCCL communicator has none yet).
  virtual CommHandle iall_to_all(std::span<const float> send, std::span<const int64_t> send_counts,
                                 std::span<float> recv, std::span<const int64_t> recv_counts);
  // Even blocks of int64 (the counts of the uneven form): send and recv hold world_size blocks
  // of the same size; block r of send goes to rank r, block q of recv came from rank q.
  virtual CommHandle iall_to_all(std::span<const int64_t> send, std::span<int64_t> recv);
  // A communicator over the ranks that pass the same `color` (MPI_Comm_split; a collective over
  // this communicator: every rank calls it), ranked by `key` then by rank. Expert parallelism's
  // groups: the ranks that share experts' tokens, and the ranks that hold the same experts. Same
  // options (timeout) as this one. The base answers unimplemented.
  virtual StatusOr<std::unique_ptr<Communicator>> split(int color, int key);

  // ---- Blocking conveniences: start, then wait. ----
  Status all_reduce_sum(std::span<const float> send, std::span<float> recv) {
    return iall_reduce_sum(send, recv).wait();
  }
  Status all_reduce_sum(std::span<const double> send, std::span<double> recv) {
    return iall_reduce_sum(send, recv).wait();
  }
  Status reduce_scatter_sum(std::span<const float> send, std::span<float> recv) {
    return ireduce_scatter_sum(send, recv).wait();
  }
  Status all_gather(std::span<const float> send, std::span<float> recv) {
    return iall_gather(send, recv).wait();
  }
  Status broadcast(std::span<std::byte> data, int root) { return ibroadcast(data, root).wait(); }
  Status barrier() { return ibarrier().wait(); }
  Status all_to_all(std::span<const float> send, std::span<const int64_t> send_counts,
                    std::span<float> recv, std::span<const int64_t> recv_counts) {
    return iall_to_all(send, send_counts, recv, recv_counts).wait();
  }
  Status all_to_all(std::span<const int64_t> send, std::span<int64_t> recv) {
    return iall_to_all(send, recv).wait();
  }
  // The sum of one value over ranks (losses, sums of squares).
  StatusOr<double> all_reduce_sum(double value);

  // Ends every rank of the run now with `exit_code` (MPI_Abort): for a rank that cannot go on
  // while the others wait in a collective. Does not return.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// One process: rank 0 of 1, collectives are copies that complete at once.
class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  const char* backend_name() const override { return "self"; }
  CommHandle iall_reduce_sum(std::span<const float> send, std::span<float> recv) override;
  CommHandle iall_reduce_sum(std::span<const double> send, std::span<double> recv) override;
  CommHandle ireduce_scatter_sum(std::span<const float> send, std::span<float> recv) override;
  CommHandle ireduce_scatter_sum(std::span<const float> send, std::span<const int64_t> counts,
                                 std::span<float> recv) override;
  CommHandle iall_gather(std::span<const float> send, std::span<float> recv) override;
  CommHandle iall_gather(std::span<const float> send, std::span<const int64_t> counts,
                         std::span<float> recv) override;
  CommHandle ibroadcast(std::span<std::byte> data, int root) override;
  CommHandle ibarrier() override { return CommHandle(); }
  CommHandle iall_to_all(std::span<const float> send, std::span<const int64_t> send_counts,
                         std::span<float> recv, std::span<const int64_t> recv_counts) override;
  CommHandle iall_to_all(std::span<const int64_t> send, std::span<int64_t> recv) override;
  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override;
  [[noreturn]] void abort(int exit_code) override;
};

// How a communicator behaves, the same on every rank.
struct CommOptions {
  // A collective not complete after this many seconds ends the job (MPI_Abort, every rank exits
  // non-zero) with one line: "rank R: all_reduce did not complete within S s ...". PyTorch's
  // default process-group timeout is 10 minutes; <= 0 waits forever. The CLI's --comm-timeout.
  double timeout_seconds = 600;
};

// Looks up an environment variable; nullptr when unset (std::getenv in production).
using CommEnvLookup = std::function<const char*(const char*)>;

// Whether an MPI launcher started this process: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set.
bool launched_by_mpi(const CommEnvLookup& env);

// The torchrun-style variables RANK, WORLD_SIZE and LOCAL_RANK, when set, must agree with what
// the communicator says: a stale export from another launcher would otherwise make a rank read
// the wrong data. invalid_argument naming the variable on a mismatch or a non-number.
Status check_torchrun_vars(const CommEnvLookup& env, int rank, int world_size, int local_rank);

// The communicator for this process: MPI when ljperf was built with MPI and an MPI launcher
// started it, else SelfCommunicator. Errors: launched as several processes (by an MPI launcher
// or WORLD_SIZE > 1) with a build that cannot talk between them; MPI failing to start; the
// torchrun variables disagreeing with MPI.
StatusOr<std::unique_ptr<Communicator>> make_communicator(const CommEnvLookup& env,
                                                          const CommOptions& options = {});
// The same in the real environment.
StatusOr<std::unique_ptr<Communicator>> make_communicator(const CommOptions& options = {});

// The first line of a multi-rank failure: prints "error: <message>; ending every rank" (and its
// hint line) to core/log.h's error output, which names the rank ("rank R: "; a silenced rank's
// saved stderr), and ends every rank with exit code 1 (Communicator::abort). For a rank that fails
// while the others may be waiting in a collective: returning the error would leave them waiting
// until the timeout.
[[noreturn]] void abort_all_ranks(Communicator& comm, const Status& why);

// Waiting on a collective (the MPI and NCCL communicators poll): after `polls` polls and
// `waited_seconds`, returns at once for the first 1000 polls (a short collective gets no added
// latency), then yields, then sleeps 100 us (a long wait does not burn a core the other ranks may
// need).
void back_off_while_waiting(int64_t polls, double waited_seconds);
// The line a rank prints when a collective has not completed within the timeout:
// "<op> did not complete within <S> s (a peer died or hangs); aborting the job".
std::string collective_timeout_line(const char* op, double timeout_seconds);

// Makes a rank-local result a shared one: every rank says whether `mine` failed (one all-reduce);
// all get an error when any rank failed (their own, or "ranks 1, 3 failed; every rank stops"), so
// they can all return it and none is left waiting in a later collective. ok only when every rank
// is.
Status agree_on_status(Communicator& comm, const Status& mine);

// Each rank's `values` (the same count on every rank) on every rank: row r = rank r's, by one
// all-reduce of a zeroed table. The values must be exact in a double (integers below 2^53).
StatusOr<std::vector<double>> all_gather_exact(Communicator& comm,
                                               const std::vector<double>& values);

}  // namespace lj
