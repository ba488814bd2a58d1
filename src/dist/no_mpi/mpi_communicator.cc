// dist/mpi_communicator.h in a build without MPI.
#include "dist/mpi_communicator.h"

namespace lj {

StatusOr<std::unique_ptr<Communicator>> make_mpi_communicator(const CommEnvLookup&,
                                                              const CommOptions&) {
  return unimplemented("this ljperf was built without MPI",
                       "install libopenmpi-dev and rebuild (-DLJ_MPI=ON)");
}

}  // namespace lj
