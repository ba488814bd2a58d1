// The NCCL communicator: GPU collectives between the ranks of a data-parallel run, on the
// dist/communicator.h interface (docs/architecture.md "Distributed training": GPU collectives use
// NCCL, bootstrapped over MPI). Built with LJ_CUDA (dist/cuda/); without it make_nccl_communicator
// says so (dist/no_cuda/).
//
// Bootstrap: rank 0 makes the ncclUniqueId and broadcasts it over the `bootstrap` communicator
// (MPI under mpirun, the self communicator for one process); every rank then joins the NCCL
// communicator of the same rank and world size. NCCL reads its own environment, so
// NCCL_SOCKET_IFNAME (the network interface between hosts) and NCCL_DEBUG are respected as set.
//
// Buffers: every span handed to a collective is device memory on this rank's device (the
// pointer and count are passed to NCCL; the host never reads them).
//
// Streams: collectives run on the communicator's own stream, so they overlap compute. Each one
// first waits (on the device) for the work already queued on NcclOptions::compute_stream, so it
// reduces what compute produced; the host is not blocked. A CommHandle completes when the
// collective has finished on the device: test() polls its event, wait() blocks on it.
//
// Never hangs: the communicator is made non-blocking (ncclConfig_t::blocking = 0), and wait()
// polls the collective's event and NCCL's asynchronous error against CommOptions::timeout_seconds.
// Past the deadline, or on an NCCL error (a peer died), the rank prints one line naming itself
// and the operation, aborts the NCCL communicator (ncclCommAbort frees its kernels) and ends every
// rank through the bootstrap communicator (MPI_Abort).
#pragma once

#include <memory>

#include "dist/communicator.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; this header stays free of CUDA's headers

namespace lj {

struct NcclOptions {
  // The CUDA device of this rank; -1: the local rank modulo the number of visible devices (one
  // rank per GPU, as mpirun and srun place them).
  int device = -1;
  // Collectives start after the work queued here before them (the producer of the gradients);
  // nullptr: the legacy default stream.
  CUstream_st* compute_stream = nullptr;
};

// The NCCL communicator of the ranks of `bootstrap` (same rank and world size), which must
// outlive it: its abort() ends the job. Errors: built without CUDA; no usable CUDA device (the
// CUDA probe's reason); NCCL failing to start (its error string, with a hint to NCCL_DEBUG=WARN).
StatusOr<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& bootstrap,
                                                               const NcclOptions& nccl = {},
                                                               const CommOptions& options = {});

}  // namespace lj
