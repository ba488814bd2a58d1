// ljperf: train Llama-family models and measure how fast they train.
#include <cstdio>
#include <vector>

#include "cli/cli.h"
#include "core/log.h"

#ifndef LJ_VERSION
#define LJ_VERSION "dev"
#endif

int main(int argc, char** argv) {
  lj::init_log_level_from_env();
  CLI::App app{"ljperf: train Llama-family language models and measure how fast they train"};
  app.set_version_flag("--version", std::string("ljperf ") + LJ_VERSION);
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, lj::cli::RunFn>> commands;
  lj::cli::RunFn bench = lj::cli::add_benchmark_command(app);
  commands.emplace_back(app.get_subcommand("benchmark"), bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : commands) {
    if (!sub->parsed()) continue;
    const lj::Status s = run();
    if (s.ok()) return 0;
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    if (!s.hint().empty()) std::fprintf(stderr, "hint: %s\n", s.hint().c_str());
    return 1;
  }
  return 0;
}
