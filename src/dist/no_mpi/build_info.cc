// dist/build_info.h in a build without MPI.
#include "dist/build_info.h"

namespace lj {

bool built_with_mpi() {
  return false;
}

std::string mpi_library_version() {
  return "";
}

}  // namespace lj
