// The communicator and the output gate of a command; see dist_session.h.
#include "cli/dist_session.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "core/log.h"
#include "runtime/launch_env.h"

namespace lj::cli {
namespace {

std::string rank_prefix(int rank) {
  return "rank " + std::to_string(rank) + ": ";
}

// This host's name as a number a double holds exactly (52 bits of its hash), for gather().
double host_key() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return 0;
  const uint64_t h = std::hash<std::string>{}(name);
  return static_cast<double>(h & ((uint64_t{1} << 52) - 1));
}

}  // namespace

void label_errors_by_launch_rank() {
  const StatusOr<LaunchEnv> env = resolve_launch_env([](const char* v) { return std::getenv(v); });
  // A malformed variable is make_communicator's error to report, with its hint.
  if (env.ok() && env->world_size > 1) set_error_output(STDERR_FILENO, rank_prefix(env->rank));
}

void print_error(const Status& s) {
  write_error_line("error: " + s.message());
  if (!s.hint().empty()) write_error_line("hint: " + s.hint());
}

StatusOr<std::unique_ptr<DistSession>> DistSession::start(const CommOptions& options) {
  LJ_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, make_communicator(options));
  std::unique_ptr<DistSession> d(new DistSession(std::move(comm)));
  d->install_gate();
  if (d->distributed()) {
    // Here, before any rank can fail on its own: every rank makes this collective.
    LJ_ASSIGN_OR_RETURN(const std::vector<double> hosts, d->gather(host_key()));
    d->ranks_on_host_ = static_cast<int>(
        std::count(hosts.begin(), hosts.end(), hosts[static_cast<size_t>(d->rank())]));
  }
  return d;
}

Status DistSession::run(const CommOptions& options,
                        const std::function<Status(DistSession&)>& body) {
  LJ_ASSIGN_OR_RETURN(std::unique_ptr<DistSession> d, start(options));
  return d->finish(body(*d));
}

void DistSession::install_gate() {
  if (!distributed()) return;
  if (is_root()) {
    set_error_output(STDERR_FILENO, rank_prefix(0));
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  saved_stdout_ = ::dup(STDOUT_FILENO);
  saved_stderr_ = ::dup(STDERR_FILENO);
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved_stdout_ < 0 || saved_stderr_ < 0 || devnull < 0) {
    // No gate is better than no errors: this rank prints like rank 0.
    LJ_LOG(warning) << "rank " << rank() << ": could not silence its output";
    if (devnull >= 0) ::close(devnull);
    set_error_output(STDERR_FILENO, rank_prefix(rank()));
    return;
  }
  ::dup2(devnull, STDOUT_FILENO);
  ::dup2(devnull, STDERR_FILENO);
  ::close(devnull);
  set_error_output(saved_stderr_, rank_prefix(rank()));
}

DistSession::~DistSession() {
  if (saved_stderr_ < 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_stdout_, STDOUT_FILENO);
  ::dup2(saved_stderr_, STDERR_FILENO);
  set_error_output(STDERR_FILENO, rank_prefix(rank()));
  ::close(saved_stdout_);
  ::close(saved_stderr_);
}

DataParallel DistSession::data_parallel(const ZeroConfig& zero) {
  const bool ep = distributed() && experts_;
  return DataParallel{.comm = distributed() ? comm_.get() : nullptr,
                      .zero = zero,
                      .experts = ep ? experts_->ep.get() : nullptr,
                      .expert_data = ep ? experts_->edp.get() : nullptr};
}

Status DistSession::split_experts(int size) {
  if (size <= 1 || !distributed() || world_size() % size != 0 || experts_) return ok_status();
  LJ_ASSIGN_OR_RETURN(ExpertGroups g, make_expert_groups(*comm_, size));
  experts_ = std::make_unique<ExpertGroups>(std::move(g));
  return ok_status();
}

Status DistSession::agree(const Status& local) {
  Status s = agree_on_status(*comm_, local);
  // An agreed error is every rank's: each returns it and none waits in a collective, so finish()
  // returns it rather than ending the job.
  collectives_started_ = s.ok();
  return s;
}

StatusOr<std::vector<double>> DistSession::gather(double value) {
  std::vector<double> v(static_cast<size_t>(world_size()), 0.0);
  v[static_cast<size_t>(rank())] = value;
  LJ_RETURN_IF_ERROR(comm_->all_reduce_sum(std::span<const double>(v), std::span<double>(v)));
  return v;
}

Status DistSession::finish(Status s) {
  if (s.ok() || !distributed() || !collectives_started_) return s;
  // The other ranks may be waiting for this one in a collective: end them all.
  abort_all_ranks(*comm_, s);  // does not return
}

}  // namespace lj::cli
