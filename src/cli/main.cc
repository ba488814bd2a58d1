// ljperf: train Llama-family models and measure how fast they train.
#include <cstdio>
#include <vector>

#include "cli/cli.h"
#include "cli/doctor.h"
#include "core/log.h"

#ifndef LJ_VERSION
#define LJ_VERSION "dev"
#endif

int main(int argc, char** argv) {
  lj::init_log_level_from_env();
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
    std::fprintf(stderr, "error: %s\nhint: see ljperf --help, or ljperf <command> --help\n",
                 e.what());
    return 2;
  }
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    const lj::Status s = c.run();
    if (s.ok()) return 0;
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    if (!s.hint().empty()) std::fprintf(stderr, "hint: %s\n", s.hint().c_str());
    return 1;
  }
  return 0;
}
