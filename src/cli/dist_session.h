// The processes of a run as a command sees them (docs/architecture.md "Distributed training"): one
// call makes the communicator and gates the output, so a command runs the same code on every rank
// and only rank 0 is heard.
//
//   return DistSession::run(CommOptions{.timeout_seconds = args.comm_timeout_s},
//                           [&](DistSession& dist) -> Status {
//     ... resolve the run; dist.world_size(), dist.rank() ...
//     LJ_RETURN_IF_ERROR(dist.agree(prepared.status()));  // every rank ready, or every rank stops
//     ... train with TrainStepConfig::data_parallel = dist.data_parallel(zero) ...
//   });
//
// The output gate: with several ranks, ranks other than 0 print nothing (their stdout and stderr
// go to /dev/null, so no print needs an `if`), except errors: core/log.h's error output is their
// saved stderr, and every rank's errors (failed checks included) carry "rank K: ". One process
// prints as before, without a prefix.
//
// Errors and hangs: a rank that returns an error while the others wait in a collective would
// leave them waiting forever. Before the first collective of training, agree() makes every rank
// stop together when any rank failed (an error found on one rank only, e.g. a memory check
// against what its host has free, stops all; dist's agree_on_status). After it, an error on a
// rank is printed and ends every rank (dist's abort_all_ranks). A collective that never completes
// ends the job after CommOptions::timeout_seconds (the commands' --comm-timeout).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"
#include "dist/communicator.h"
#include "dist/zero.h"
#include "train/expert_parallel.h"

namespace lj::cli {

// Names this process's error lines "rank K: " when the launch variables (runtime/launch_env.h)
// say a launcher started several processes: main() calls it first, so even a bad flag, found
// before MPI starts, says which rank it came from.
void label_errors_by_launch_rank();

// The CLI's one line for an error and its hint line ("error: ...", "hint: ..."), to core/log.h's
// error output (stderr, or a silenced rank's saved stderr, with the rank prefix).
void print_error(const Status& s);

class DistSession {
 public:
  // Makes the communicator (make_communicator: MPI when an MPI launcher started this process,
  // the torchrun variables checked against MPI; a build without MPI launched as several
  // processes is refused) and installs the output gate. `options`: the collective timeout
  // (--comm-timeout). Errors: those of make_communicator.
  static StatusOr<std::unique_ptr<DistSession>> start(const CommOptions& options);
  // start(options), then `body`, then finish(): what a command's run function returns.
  static Status run(const CommOptions& options, const std::function<Status(DistSession&)>& body);
  ~DistSession();  // removes the gate (stdout and stderr back as they were)
  DistSession(const DistSession&) = delete;
  DistSession& operator=(const DistSession&) = delete;

  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->world_size(); }
  bool is_root() const { return rank() == 0; }
  bool distributed() const { return world_size() > 1; }
  // Ranks on this host, this one included (by host name, gathered once in start()): they share
  // its memory, so a rank's budget is the host's available memory divided among them.
  int ranks_on_host() const { return ranks_on_host_; }
  Communicator& comm() { return *comm_; }
  const char* backend_name() const { return comm_->backend_name(); }

  // TrainStepConfig::data_parallel for `zero`: the communicator with several ranks; none with
  // one, so one process trains exactly as it does without data parallelism. With expert groups
  // (split_experts), the expert-parallel group too.
  DataParallel data_parallel(const ZeroConfig& zero);
  // --expert-parallel N: splits the world into its expert-parallel and expert-data-parallel
  // groups (train/expert_parallel.h; a collective: every rank calls it, before anything that
  // may fail on one rank alone). Nothing for N = 1, one process, or an N that does not divide the
  // world (resolve_run refuses that one by name).
  Status split_experts(int size);

  // A collective (every rank calls it; agree_on_status): ok when `local` is ok on every rank;
  // otherwise this rank's own error, or, on a rank that was fine, an error naming the ranks that
  // failed. After it returns ok, an error ends every rank (finish()); an error it returned is
  // every rank's, so finish() returns it (may be called again, e.g. on a command's result).
  Status agree(const Status& local);
  // Every rank's `value`, in rank order, on every rank. A collective.
  StatusOr<std::vector<double>> gather(double value);

  // The command's result, as main() gets it: ok, or an error main() prints. An error after a
  // successful agree() on a multi-process run is printed here and ends every rank with exit
  // code 1 (abort_all_ranks; does not return).
  Status finish(Status s);

 private:
  explicit DistSession(std::unique_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  void install_gate();

  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<ExpertGroups> experts_;      // split_experts' groups
  int saved_stdout_ = -1, saved_stderr_ = -1;  // ranks other than 0: the real ones
  bool collectives_started_ = false;
  int ranks_on_host_ = 1;
};

}  // namespace lj::cli
