// CUDA source ops (source.cu): constant and iota; registered by register_source (kernels.h).
#pragma once

#include "backends/cuda/kernels.h"
