// The MPI communicator: CPU collectives between the processes an MPI launcher started (mpirun,
// srun --mpi=pmix). Built only with MPI (dist/mpi/); this header has no MPI types, so it may be
// included anywhere, and make_mpi_communicator says so when MPI is not built in (dist/no_mpi/).
//
// The process's MPI is initialised on first use (MPI_Init_thread, MPI_THREAD_FUNNELED: only the
// thread that made the communicator may call it) and finalised at exit. The communicator works on
// a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so a failed collective is a Status.
// Rank and world size come from MPI; local rank from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
//
// Waiting never hangs: a request is polled with MPI_Test against a deadline of
// CommOptions::timeout_seconds from when the wait began (tight polls first, then yielding, then
// sleeping up to 100 us between polls, so a long wait does not burn a core the other ranks may
// need). Past the deadline the rank prints one line naming itself, the operation and the timeout
// and calls MPI_Abort: the launcher ends every rank with a non-zero code.
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace lj {

// unimplemented when built without MPI.
StatusOr<std::unique_ptr<Communicator>> make_mpi_communicator(const CommEnvLookup& env,
                                                              const CommOptions& options);

}  // namespace lj
