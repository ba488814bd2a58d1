// The range of every numeric flag, checked by CLI11 as the command line is parsed, before any
// work: a learning rate of nan or -5, a negative thread count or an every-N of -2 is one error
// line naming the flag ("--lr: must be a finite number > 0, got nan").
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace lj::cli {

CLI::Validator finite_above_zero();            // learning rates
CLI::Validator finite_at_least_zero();         // weight decay, clipping, timeouts (0: off)
CLI::Validator integer_at_least(int64_t min);  // steps, sizes (1); every-N, counts (0)

}  // namespace lj::cli
