#include "dist/communicator.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "dist/build_info.h"
#include "dist/mpi_communicator.h"

namespace lj {

CommHandle& CommHandle::operator=(CommHandle&& other) {
  if (this != &other) {
    (void)wait();
    request_ = std::move(other.request_);
    status_ = std::move(other.status_);
  }
  return *this;
}

CommHandle::~CommHandle() {
  (void)wait();
}

Status CommHandle::wait() {
  if (request_) {
    status_ = request_->wait();
    request_.reset();
  }
  return status_;
}

bool CommHandle::test() {
  if (!request_) return true;
  if (!request_->test()) return false;
  status_ = request_->wait();  // complete: returns at once
  request_.reset();
  return true;
}

StatusOr<double> Communicator::all_reduce_sum(double value) {
  double out = 0;
  LJ_RETURN_IF_ERROR(
      all_reduce_sum(std::span<const double>(&value, 1), std::span<double>(&out, 1)));
  return out;
}

CommHandle Communicator::iall_to_all(std::span<const float>, std::span<const int64_t>,
                                     std::span<float>, std::span<const int64_t>) {
  return CommHandle(
      unimplemented(std::string("the ") + backend_name() + " communicator has no all-to-all",
                    "expert parallelism runs on the CPU over MPI"));
}
CommHandle Communicator::iall_to_all(std::span<const int64_t>, std::span<int64_t>) {
  return iall_to_all(std::span<const float>(), std::span<const int64_t>(), std::span<float>(),
                     std::span<const int64_t>());
}
StatusOr<std::unique_ptr<Communicator>> Communicator::split(int, int) {
  return unimplemented(std::string("the ") + backend_name() + " communicator cannot be split",
                       "expert parallelism runs on the CPU over MPI");
}

namespace {

template <class T>
CommHandle copy_into(std::span<const T> send, std::span<T> recv, const char* what) {
  if (send.size() != recv.size()) {
    return CommHandle(invalid_argument(std::string(what) + ": send has " +
                                       std::to_string(send.size()) + " elements, recv " +
                                       std::to_string(recv.size())));
  }
  if (send.data() != recv.data() && !send.empty()) {
    std::memmove(recv.data(), send.data(), send.size_bytes());
  }
  return CommHandle();
}

}  // namespace

CommHandle SelfCommunicator::iall_reduce_sum(std::span<const float> send, std::span<float> recv) {
  return copy_into(send, recv, "all_reduce");
}
CommHandle SelfCommunicator::iall_reduce_sum(std::span<const double> send, std::span<double> recv) {
  return copy_into(send, recv, "all_reduce");
}
CommHandle SelfCommunicator::ireduce_scatter_sum(std::span<const float> send,
                                                 std::span<float> recv) {
  return copy_into(send, recv, "reduce_scatter");
}
CommHandle SelfCommunicator::ireduce_scatter_sum(std::span<const float> send,
                                                 std::span<const int64_t> counts,
                                                 std::span<float> recv) {
  if (counts.size() != 1) {
    return CommHandle(invalid_argument("reduce_scatter: " + std::to_string(counts.size()) +
                                       " counts in a world of 1"));
  }
  return copy_into(send, recv, "reduce_scatter");
}
CommHandle SelfCommunicator::iall_gather(std::span<const float> send, std::span<float> recv) {
  return copy_into(send, recv, "all_gather");
}
CommHandle SelfCommunicator::iall_gather(std::span<const float> send,
                                         std::span<const int64_t> counts, std::span<float> recv) {
  if (counts.size() != 1) {
    return CommHandle(invalid_argument("all_gather: " + std::to_string(counts.size()) +
                                       " counts in a world of 1"));
  }
  return copy_into(send, recv, "all_gather");
}
CommHandle SelfCommunicator::ibroadcast(std::span<std::byte> data, int root) {
  if (root != 0) {
    return CommHandle(
        invalid_argument("broadcast from rank " + std::to_string(root) + " in a world of 1"));
  }
  return CommHandle();
}
CommHandle SelfCommunicator::iall_to_all(std::span<const float> send,
                                         std::span<const int64_t> send_counts,
                                         std::span<float> recv,
                                         std::span<const int64_t> recv_counts) {
  if (send_counts.size() != 1 || recv_counts.size() != 1 ||
      send_counts[0] != static_cast<int64_t>(send.size()) || send_counts[0] != recv_counts[0]) {
    return CommHandle(invalid_argument(
        "all_to_all: counts disagree with the buffers in a world "
        "of 1 (send " +
        std::to_string(send.size()) + ", recv " + std::to_string(recv.size()) + ")"));
  }
  return copy_into(send, recv, "all_to_all");
}
CommHandle SelfCommunicator::iall_to_all(std::span<const int64_t> send, std::span<int64_t> recv) {
  return copy_into(send, recv, "all_to_all");
}
StatusOr<std::unique_ptr<Communicator>> SelfCommunicator::split(int, int) {
  return std::unique_ptr<Communicator>(std::make_unique<SelfCommunicator>());
}
void SelfCommunicator::abort(int exit_code) {
  std::_Exit(exit_code);
}

bool launched_by_mpi(const CommEnvLookup& env) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (env(var) != nullptr) return true;
  }
  return false;
}

namespace {

// The value of `var`, or -1 when unset; invalid_argument when it is not a non-negative integer.
StatusOr<int> int_var(const CommEnvLookup& env, const char* var) {
  const char* text = env(var);
  if (text == nullptr) return -1;
  int v = -1;
  const char* end = text + std::strlen(text);
  const auto [ptr, ec] = std::from_chars(text, end, v);
  if (ec != std::errc() || ptr != end || v < 0) {
    return invalid_argument(std::string(var) + "='" + text + "' is not a non-negative integer",
                            std::string("unset ") + var + " or fix it");
  }
  return v;
}

}  // namespace

Status check_torchrun_vars(const CommEnvLookup& env, int rank, int world_size, int local_rank) {
  const std::pair<const char*, int> checks[] = {
      {"RANK", rank}, {"WORLD_SIZE", world_size}, {"LOCAL_RANK", local_rank}};
  for (const auto& [var, expected] : checks) {
    LJ_ASSIGN_OR_RETURN(int v, int_var(env, var));
    if (v >= 0 && v != expected) {
      return invalid_argument(
          std::string(var) + "=" + std::to_string(v) + " but MPI says " + std::to_string(expected) +
              " (rank " + std::to_string(rank) + " of " + std::to_string(world_size) + ")",
          std::string("unset ") + var +
              " (often a stale export from torchrun) or launch with the matching process count");
    }
  }
  return ok_status();
}

StatusOr<std::unique_ptr<Communicator>> make_communicator(const CommEnvLookup& env,
                                                          const CommOptions& options) {
  if (launched_by_mpi(env) && built_with_mpi()) return make_mpi_communicator(env, options);
  // One process as far as we can talk: refuse when the launcher started several, since each
  // would train alone on the same data.
  int world = 1;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}) {
    LJ_ASSIGN_OR_RETURN(int v, int_var(env, var));
    if (v > 1) {
      world = v;
      break;
    }
  }
  if (world > 1) {
    if (!built_with_mpi()) {
      return unimplemented(
          "this ljperf was built without MPI; it was launched as " + std::to_string(world) +
              " processes, and each would train alone",
          "install libopenmpi-dev (and openmpi-bin) and rebuild (-DLJ_MPI=ON is the default when "
          "MPI is found), or run one process");
    }
    return invalid_argument(
        "WORLD_SIZE=" + std::to_string(world) + " but no MPI launcher started this process",
        "launch with mpirun -np " + std::to_string(world) +
            " (or srun --mpi=pmix); torchrun is not supported on the CPU");
  }
  return std::unique_ptr<Communicator>(std::make_unique<SelfCommunicator>());
}

StatusOr<std::unique_ptr<Communicator>> make_communicator(const CommOptions& options) {
  return make_communicator([](const char* var) { return std::getenv(var); }, options);
}

void abort_all_ranks(Communicator& comm, const Status& why) {
  // Through core/log.h's error output: on a rank whose stderr is silenced (cli/dist_session.h)
  // that is its saved stderr, with the rank prefix already set (never added twice).
  std::fflush(stdout);
  write_rank_error_line(comm.rank(), "error: " + why.message() + "; ending every rank");
  if (!why.hint().empty()) write_rank_error_line(comm.rank(), "hint: " + why.hint());
  std::fflush(stderr);
  comm.abort(1);
  std::_Exit(1);  // abort() does not return; this tells the compiler so
}

void back_off_while_waiting(int64_t polls, double waited_seconds) {
  if (polls < 1000) return;
  if (waited_seconds < 0.01) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::string collective_timeout_line(const char* op, double timeout_seconds) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeout_seconds);
  return std::string(op) + " did not complete within " + seconds +
         " s (a peer died or hangs); aborting the job";
}

StatusOr<std::vector<double>> all_gather_exact(Communicator& comm,
                                               const std::vector<double>& values) {
  const size_t n = values.size();
  std::vector<double> all(n * static_cast<size_t>(comm.world_size()), 0.0);
  std::copy(values.begin(), values.end(),
            all.begin() + static_cast<std::ptrdiff_t>(n * static_cast<size_t>(comm.rank())));
  LJ_RETURN_IF_ERROR(comm.all_reduce_sum(std::span<const double>(all), std::span<double>(all)));
  return all;
}

Status agree_on_status(Communicator& comm, const Status& mine) {
  const int world = comm.world_size();
  std::vector<double> failed(static_cast<size_t>(world), 0.0);
  failed[static_cast<size_t>(comm.rank())] = mine.ok() ? 0.0 : 1.0;
  LJ_RETURN_IF_ERROR(
      comm.all_reduce_sum(std::span<const double>(failed), std::span<double>(failed)));
  if (!mine.ok()) return mine;
  std::string ranks;  // every rank that failed, in rank order
  int count = 0;
  for (int r = 0; r < world; ++r) {
    if (failed[static_cast<size_t>(r)] == 0) continue;
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    ++count;
  }
  if (count == 0) return ok_status();
  return internal_error((count == 1 ? "rank " : "ranks ") + ranks + " failed; every rank stops",
                        count == 1 ? "its error line is above" : "their error lines are above");
}

}  // namespace lj
