// The range of every numeric flag, checked by CLI11 as the command line is parsed, before any
// work: a learning rate of nan or -5, a negative thread count or an every-N of -2 is one error
// line naming the flag ("--lr: must be a finite number > 0, got nan").
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace lj::cli {

CLI::Validator finite_above_zero();            // learning rates
CLI::Validator finite_at_least_zero();         // weight decay, clipping, timeouts (0: off)
CLI::Validator integer_at_least(int64_t min);  // steps, sizes (1); every-N, counts (0)

// Hides `opt` (a flag's old name) from --help and warns once it is given: "--gpus is now --np
// (<why>); the old name will go". Returns `opt`.
CLI::Option* renamed(CLI::Option* opt, const std::string& new_name, const std::string& why);

// A flag's old name, still taken for now: it sets the same value as `new_name`, so scripts keep
// working while they move. `why` says what the rename is for, in a few words.
template <typename T>
CLI::Option* add_renamed_option(CLI::App* sub, const std::string& old_name,
                                const std::string& new_name, const std::string& why, T* target) {
  return renamed(sub->add_option(old_name, *target), new_name, why);
}
// The same for a switch (no value).
inline CLI::Option* add_renamed_flag(CLI::App* sub, const std::string& old_name,
                                     const std::string& new_name, const std::string& why,
                                     bool* target) {
  return renamed(sub->add_flag(old_name, *target), new_name, why);
}

}  // namespace lj::cli
