// Subcommands of the ljperf binary. Each registers its options on the CLI11 app and runs;
// errors reach main() as a Status, printed as "error: ..." and "hint: ..." with exit code 1.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "core/status.h"

namespace lj::cli {

// A registered subcommand and the function main() calls when the user picked it.
struct Command {
  CLI::App* app;
  std::function<Status()> run;
};

Command add_benchmark_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_init_command(CLI::App& app);
Command add_train_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_ablation_command(CLI::App& app);

}  // namespace lj::cli
