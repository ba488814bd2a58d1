// The communicator every dist test runs on (made once by main.cc, under mpirun).
#pragma once

#include "dist/communicator.h"

namespace lj {

Communicator& dist_comm();

}  // namespace lj
