// How lj_dist was built. The one place outside lj_dist that may ask whether MPI is in: nothing
// else sees MPI's headers or the LJ_MPI definition (CMakeLists.txt).
#pragma once

namespace lj {

// true when this ljperf was built with MPI (CMake option LJ_MPI, on whenever MPI is found).
bool built_with_mpi();

}  // namespace lj
