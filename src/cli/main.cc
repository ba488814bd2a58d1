// ljperf: train Llama-family models and measure how fast they train.
#include <cstdio>
#include <exception>
#include <vector>

#include "cli/cli.h"
#include "cli/dist_session.h"
#include "cli/doctor.h"
#include "cli/run_guarded.h"
#include "core/log.h"
#include "probe/host_baseline.h"
#include "runtime/malloc_policy.h"

#ifndef LJ_VERSION
#define LJ_VERSION "dev"
#endif

namespace {

int run_main(int argc, char** argv) {
  // First: every later allocation is priced by the planner under these thresholds.
  lj::pin_malloc_thresholds();
  lj::init_log_level_from_env();
  lj::allow_baseline_probe();  // this is ljperf, whatever its file is named
  lj::cli::label_errors_by_launch_rank();
  CLI::App app{"ljperf: train Llama-family language models and measure how fast they train"};
  app.set_version_flag("--version", std::string("ljperf ") + LJ_VERSION);
  app.require_subcommand(1);
  const std::vector<lj::cli::Command> commands = {
      lj::cli::add_benchmark_command(app), lj::cli::add_eval_command(app),
      lj::cli::add_init_command(app),      lj::cli::add_train_command(app),
      lj::cli::add_export_command(app),    lj::cli::add_doctor_command(app),
      lj::cli::add_plan_command(app),      lj::cli::add_calibrate_command(app),
      lj::cli::add_tokenize_command(app),  lj::cli::add_ablation_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    lj::cli::print_error(
        lj::invalid_argument(e.what(), "see ljperf --help, or ljperf <command> --help"));
    return 2;
  }
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    const lj::Status s = lj::cli::run_guarded(c.run);
    if (s.ok()) return 0;
    lj::cli::print_error(s);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Commands run under run_guarded; this catches what escapes the setup and the parse.
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    lj::cli::print_error(lj::cli::escaped_exception(e.what()));
  } catch (...) {
    lj::cli::print_error(lj::cli::escaped_exception("an exception that is not a std::exception"));
  }
  return 1;
}
