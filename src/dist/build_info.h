// How lj_dist was built. The one place outside lj_dist that may ask whether MPI is in: nothing
// else sees MPI's headers. dist/mpi/ answers in a build with MPI, dist/no_mpi/ without it.
#pragma once

#include <string>

namespace lj {

// true when this ljperf was built with MPI (CMake option LJ_MPI, on whenever MPI is found).
bool built_with_mpi();

// The MPI library this ljperf was built against: MPI_Get_library_version's first line up to its
// first comma ("Open MPI v4.1.4"; callable before MPI starts); "" when built without MPI.
std::string mpi_library_version();

}  // namespace lj
