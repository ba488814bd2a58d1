// dist/nccl_communicator.h in a build without CUDA.
#include "dist/nccl_communicator.h"

namespace lj {

StatusOr<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator&, const NcclOptions&,
                                                               const CommOptions&) {
  return unimplemented("this ljperf was built without CUDA, so it has no NCCL communicator",
                       "rebuild with cmake -DLJ_CUDA=ON on a host with the CUDA toolkit");
}

}  // namespace lj
