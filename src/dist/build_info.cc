#include "dist/build_info.h"

namespace lj {

bool built_with_mpi() {
#ifdef LJ_MPI
  return true;
#else
  return false;
#endif
}

}  // namespace lj
