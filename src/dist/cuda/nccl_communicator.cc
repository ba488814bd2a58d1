// dist/nccl_communicator.h with CUDA: NCCL collectives on their own stream.
#include "dist/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/cuda.h"
#include "core/log.h"

namespace lj {
namespace {

using Clock = std::chrono::steady_clock;

Status cuda_error(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ok_status();
  return internal_error(std::string(what) + " failed: " + cudaGetErrorString(e));
}

Status nccl_error(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return ok_status();
  std::string text = std::string(what) + " failed: " + ncclGetErrorString(r);
  return internal_error(text, "a peer rank may have died; NCCL_DEBUG=WARN prints NCCL's account");
}

class NcclCommunicator;

// One collective in flight: complete when its event, recorded after it on the communicator's
// stream, has completed.
class NcclRequest final : public CommRequest {
 public:
  NcclRequest(NcclCommunicator* owner, cudaEvent_t done, const char* op)
      : owner_(owner), event_(done), op_(op) {}
  ~NcclRequest() override;
  Status wait() override;
  bool test() override { return finished_ || poll(); }

 private:
  bool poll();

  NcclCommunicator* owner_;
  cudaEvent_t event_;
  const char* op_;
  bool finished_ = false;
  Status result_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device, cudaStream_t compute, double timeout)
      : bootstrap_(bootstrap), device_(device), compute_(compute), timeout_(timeout) {}
  ~NcclCommunicator() override;

  // The CUDA and NCCL objects; then the NCCL communicator itself (collective: every rank calls it).
  Status init(const ncclUniqueId& id);

  int rank() const override { return bootstrap_.rank(); }
  int world_size() const override { return bootstrap_.world_size(); }
  int local_rank() const override { return bootstrap_.local_rank(); }
  const char* backend_name() const override { return "nccl"; }

  CommHandle iall_reduce_sum(std::span<const float> send, std::span<float> recv) override {
    if (send.size() != recv.size()) return size_error("all_reduce");
    return launch("all_reduce", [&] {
      return ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat, ncclSum, comm_,
                           stream_);
    });
  }
  CommHandle iall_reduce_sum(std::span<const double> send, std::span<double> recv) override {
    if (send.size() != recv.size()) return size_error("all_reduce");
    return launch("all_reduce", [&] {
      return ncclAllReduce(send.data(), recv.data(), send.size(), ncclDouble, ncclSum, comm_,
                           stream_);
    });
  }
  CommHandle ireduce_scatter_sum(std::span<const float> send, std::span<float> recv) override {
    if (send.size() != recv.size() * static_cast<size_t>(world_size())) {
      return size_error("reduce_scatter");
    }
    return launch("reduce_scatter", [&] {
      return ncclReduceScatter(send.data(), recv.data(), recv.size(), ncclFloat, ncclSum, comm_,
                               stream_);
    });
  }
  // NCCL has no uneven reduce-scatter: one reduce per rank to that rank, in one group.
  CommHandle ireduce_scatter_sum(std::span<const float> send, std::span<const int64_t> counts,
                                 std::span<float> recv) override {
    if (!counts_match(counts, send.size()) || recv.size() != size_t(counts[rank()])) {
      return size_error("reduce_scatter");
    }
    return launch("reduce_scatter", [&] {
      ncclResult_t r = ncclGroupStart();
      size_t offset = 0;
      for (int peer = 0; peer < world_size() && r == ncclSuccess; ++peer) {
        const size_t n = static_cast<size_t>(counts[peer]);
        if (n > 0) {
          r = ncclReduce(send.data() + offset, recv.data(), n, ncclFloat, ncclSum, peer, comm_,
                         stream_);
        }
        offset += n;
      }
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }
  CommHandle iall_gather(std::span<const float> send, std::span<float> recv) override {
    if (recv.size() != send.size() * static_cast<size_t>(world_size())) {
      return size_error("all_gather");
    }
    return launch("all_gather", [&] {
      return ncclAllGather(send.data(), recv.data(), send.size(), ncclFloat, comm_, stream_);
    });
  }
  // Uneven blocks: each rank broadcasts its block into its place, in one group.
  CommHandle iall_gather(std::span<const float> send, std::span<const int64_t> counts,
                         std::span<float> recv) override {
    if (!counts_match(counts, recv.size()) || send.size() != size_t(counts[rank()])) {
      return size_error("all_gather");
    }
    return launch("all_gather", [&] {
      ncclResult_t r = ncclGroupStart();
      size_t offset = 0;
      for (int peer = 0; peer < world_size() && r == ncclSuccess; ++peer) {
        const size_t n = static_cast<size_t>(counts[peer]);
        if (n > 0) {
          r = ncclBroadcast(send.data(), recv.data() + offset, n, ncclFloat, peer, comm_, stream_);
        }
        offset += n;
      }
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }
  CommHandle ibroadcast(std::span<std::byte> data, int root) override {
    if (root < 0 || root >= world_size()) {
      return CommHandle(invalid_argument("broadcast from rank " + std::to_string(root) + " of " +
                                         std::to_string(world_size())));
    }
    return launch("broadcast", [&] {
      return ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_);
    });
  }
  // A one-element all-reduce of device scratch: complete when every rank has reached it.
  CommHandle ibarrier() override {
    return launch("barrier", [&] {
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, stream_);
    });
  }

  [[noreturn]] void abort(int exit_code) override {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    bootstrap_.abort(exit_code);
    std::_Exit(exit_code);  // not reached: abort() does not return
  }

  // A collective past the timeout: one line naming this rank, then every rank ends.
  [[noreturn]] void time_out(const char* op) {
    std::fflush(stdout);
    write_rank_error_line(rank(), collective_timeout_line(op, timeout_));
    abort(1);
  }

  ncclComm_t comm() const { return comm_; }
  double timeout_seconds() const { return timeout_; }

 private:
  static CommHandle size_error(const char* op) {
    return CommHandle(invalid_argument(std::string(op) + ": buffer sizes do not match"));
  }
  bool counts_match(std::span<const int64_t> counts, size_t total) const {
    if (counts.size() != static_cast<size_t>(world_size())) return false;
    int64_t sum = 0;
    for (int64_t c : counts) {
      if (c < 0) return false;
      sum += c;
    }
    return static_cast<size_t>(sum) == total;
  }

  // In non-blocking mode an NCCL call may return ncclInProgress while it is still being set up;
  // its final result comes from ncclCommGetAsyncError.
  ncclResult_t settle(ncclResult_t r, const char* op) {
    const auto start = Clock::now();
    for (int64_t polls = 0; r == ncclInProgress; ++polls) {
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (timeout_ > 0 && waited > timeout_) time_out(op);
      back_off_while_waiting(polls, waited);
      if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) return ncclInternalError;
    }
    return r;
  }

  template <class Enqueue>
  CommHandle launch(const char* op, Enqueue&& enqueue) {
    if (comm_ == nullptr) return CommHandle(internal_error(std::string(op) + ": NCCL was aborted"));
    if (Status s = cuda_error(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) {
      return CommHandle(s);
    }
    // The collective reads what compute produced: order it after the work queued so far.
    if (Status s = cuda_error(cudaEventRecord(ready_, compute_), "cudaEventRecord"); !s.ok()) {
      return CommHandle(s);
    }
    if (Status s = cuda_error(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
        !s.ok()) {
      return CommHandle(s);
    }
    const ncclResult_t r = settle(enqueue(), op);
    if (r != ncclSuccess) return CommHandle(nccl_error(r, op));
    cudaEvent_t done = nullptr;
    if (Status s = cuda_error(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
                              "cudaEventCreateWithFlags");
        !s.ok()) {
      return CommHandle(s);
    }
    if (Status s = cuda_error(cudaEventRecord(done, stream_), "cudaEventRecord"); !s.ok()) {
      (void)cudaEventDestroy(done);
      return CommHandle(s);
    }
    return CommHandle(std::make_unique<NcclRequest>(this, done, op));
  }

  Communicator& bootstrap_;
  int device_;
  cudaStream_t compute_;
  double timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  float* scratch_ = nullptr;
};

Status NcclCommunicator::init(const ncclUniqueId& id) {
  LJ_RETURN_IF_ERROR(cuda_error(cudaSetDevice(device_), "cudaSetDevice"));
  // Above compute's priority: a reduction that can start should not queue behind compute.
  int least = 0, greatest = 0;
  LJ_RETURN_IF_ERROR(cuda_error(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                                "cudaDeviceGetStreamPriorityRange"));
  LJ_RETURN_IF_ERROR(
      cuda_error(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest),
                 "cudaStreamCreateWithPriority"));
  LJ_RETURN_IF_ERROR(cuda_error(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming),
                                "cudaEventCreateWithFlags"));
  LJ_RETURN_IF_ERROR(
      cuda_error(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(float)), "cudaMalloc"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return at once; settle() and the requests poll with the timeout
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, world_size(), id, rank(), &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    comm_ = nullptr;
    return nccl_error(r, "ncclCommInitRankConfig");
  }
  return nccl_error(settle(r, "ncclCommInitRankConfig"), "ncclCommInitRankConfig");
}

NcclCommunicator::~NcclCommunicator() {
  (void)cudaSetDevice(device_);
  if (comm_ != nullptr) {
    // Flushes what is in flight; a peer that is gone makes it fail, then abort frees the rest.
    ncclResult_t r = ncclCommFinalize(comm_);
    const auto start = Clock::now();
    for (int64_t polls = 0; r == ncclInProgress; ++polls) {
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > 10) break;
      back_off_while_waiting(polls, waited);
      if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) break;
    }
    if (r == ncclSuccess) {
      (void)ncclCommDestroy(comm_);
    } else {
      (void)ncclCommAbort(comm_);
    }
  }
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

NcclRequest::~NcclRequest() {
  (void)wait();  // the buffers may not be reused before the collective is done
  (void)cudaEventDestroy(event_);
}

bool NcclRequest::poll() {
  const cudaError_t q = cudaEventQuery(event_);
  if (q == cudaSuccess) {
    finished_ = true;
    return true;
  }
  if (q != cudaErrorNotReady) {
    result_ = cuda_error(q, op_);
    finished_ = true;
    return true;
  }
  // A peer that died shows up here, not on the event, which then never completes.
  ncclResult_t async = ncclSuccess;
  if (owner_->comm() == nullptr) {
    async = ncclInternalError;
  } else if (ncclCommGetAsyncError(owner_->comm(), &async) != ncclSuccess) {
    async = ncclInternalError;
  }
  if (async != ncclSuccess && async != ncclInProgress) {
    result_ = nccl_error(async, op_);
    finished_ = true;
    return true;
  }
  return false;
}

Status NcclRequest::wait() {
  const auto start = Clock::now();
  for (int64_t polls = 0; !finished_ && !poll(); ++polls) {
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    const double timeout = owner_->timeout_seconds();
    if (timeout > 0 && waited > timeout) owner_->time_out(op_);
    back_off_while_waiting(polls, waited);
  }
  return result_;
}

}  // namespace

StatusOr<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& bootstrap,
                                                               const NcclOptions& nccl,
                                                               const CommOptions& options) {
  // Every step that can fail on one rank is agreed on by all, so no rank is left waiting in the
  // bootstrap broadcast or in NCCL's initialisation for a peer that has given up.
  const cuda::Probe probe = cuda::probe();
  int device = nccl.device;
  Status usable = ok_status();
  if (probe.device_count() == 0) {
    usable = unimplemented("NCCL needs a CUDA device: " + probe.error,
                           "run on a host with an NVIDIA GPU and its driver");
  } else if (device < 0) {
    device = bootstrap.local_rank() % probe.device_count();
  } else if (device >= probe.device_count()) {
    usable = invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" +
                                  std::to_string(probe.device_count()) + " visible)",
                              "check CUDA_VISIBLE_DEVICES");
  }
  LJ_RETURN_IF_ERROR(agree_on_status(bootstrap, usable));

  ncclUniqueId id{};
  Status made = cuda_error(cudaSetDevice(device), "cudaSetDevice");
  if (made.ok() && bootstrap.rank() == 0)
    made = nccl_error(ncclGetUniqueId(&id), "ncclGetUniqueId");
  LJ_RETURN_IF_ERROR(agree_on_status(bootstrap, made));
  LJ_RETURN_IF_ERROR(bootstrap.broadcast(
      std::span<std::byte>(reinterpret_cast<std::byte*>(id.internal), sizeof(id.internal)), 0));

  auto comm = std::make_unique<NcclCommunicator>(
      bootstrap, device, reinterpret_cast<cudaStream_t>(nccl.compute_stream),
      options.timeout_seconds);
  LJ_RETURN_IF_ERROR(agree_on_status(bootstrap, comm->init(id)));
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace lj
