// `ljperf ablation`: the same benchmark with each optimization switched on in turn (base,
// +comm, +compile, +compile +ckpt-opt; ablation_report.h holds the table of configurations), in
// interleaved rounds so that load drifts hit every configuration alike. Each run is a separate
// `ljperf benchmark --out` child of this same binary (/proc/self/exe), so every configuration
// has its own process peak RSS; with --np N (N > 1) each run is `mpirun -np N <this binary>
// benchmark ...`, and a DeepSpeed JSON the ablation writes per row sets overlap_comm (blocking
// collectives for base, overlapped from +comm on). Prints a Markdown table; with --out, writes
// results.json (every round's figures and the medians), table.md and chart.svg, each atomically.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/ablation_report.h"
#include "cli/cli.h"
#include "cli/doctor_host.h"
#include "cli/progress.h"
#include "core/dtype.h"
#include "core/text_file.h"
#include "dist/build_info.h"
#include "io/atomic_file.h"
#include "plan/host_plan.h"
#include "probe/host_peak.h"
#include "runtime/launch_env.h"
#include "runtime/peak_probe.h"

extern char** environ;

#ifndef LJ_VERSION
#define LJ_VERSION "dev"
#endif

namespace lj::cli {
namespace {

// The benchmark flags each configuration sets itself; a user's copy would blur the rows.
constexpr const char* kOwnedFlags[] = {"--compile",          "--ckpt-opt",         "--recompute",
                                       "--recompute-layers", "--recompute-method", "--output",
                                       "--profile"};
// Environment switches for the same optimizations (the seed image's); unset in every child, so
// that base is eager without recompute whatever the shell exported.
constexpr const char* kOwnedEnv[] = {"LJ_COMPILE", "CHECKPOINT_OPTIMIZATION"};

struct AblationArgs {
  std::string model = "small";
  int rounds = 3;
  int np = 1;  // ranks per run (mpirun -np) when above 1
  std::string out;
  std::string memory_limit;
  std::string peer_results;
  std::vector<std::string> from;
  bool keep_logs = false;
  CLI::App* app = nullptr;
};

// A temporary folder for the children's result files and logs; removed unless kept.
class WorkDir {
 public:
  static StatusOr<std::unique_ptr<WorkDir>> create() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/ljperf-ablation.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return io_error("cannot create a temporary folder from " + tmpl + ": " + std::strerror(errno),
                      "set TMPDIR to a writable folder");
    }
    return std::make_unique<WorkDir>(tmpl);
  }
  explicit WorkDir(std::string path) : path_(std::move(path)) {}
  ~WorkDir() {
    if (keep_) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// The `error:` and `hint:` lines a failed child printed (its last ones).
std::pair<std::string, std::string> child_error(const std::string& log) {
  std::string error, hint;
  size_t start = 0;
  while (start < log.size()) {
    size_t nl = log.find('\n', start);
    if (nl == std::string::npos) nl = log.size();
    const std::string line = log.substr(start, nl - start);
    if (line.rfind("error: ", 0) == 0) error = line.substr(7);
    if (line.rfind("hint: ", 0) == 0) hint = line.substr(6);
    start = nl + 1;
  }
  return {error, hint};
}

// Runs `program` (this binary when "") with `argv` (argv[0]: its path), stdout and stderr into
// `log_path`, and the environment less kOwnedEnv; the exit status as waitpid gives it.
StatusOr<int> spawn_and_wait(const std::string& program, const std::vector<std::string>& argv,
                             const std::string& log_path) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    const bool owned = std::any_of(std::begin(kOwnedEnv), std::end(kOwnedEnv), [&](const char* k) {
      const size_t n = std::strlen(k);
      return std::strncmp(*e, k, n) == 0 && (*e)[n] == '=';
    });
    if (!owned) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return io_error("cannot write " + log_path + ": " + std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return io_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // The child: ends with the ablation (a kill of the ablation leaves no benchmark running;
    // mpirun ends its ranks on SIGTERM), output into the log, then this same binary:
    // /proc/self/exe is the running image even when the file was since replaced (a rebuild
    // during a long ablation).
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execve(program.empty() ? "/proc/self/exe" : program.c_str(), cargv.data(), envp.data());
    _exit(127);
  }
  close(log_fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return io_error(std::string("waitpid: ") + std::strerror(errno));
  }
  return status;
}

StatusOr<std::string> self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return io_error("cannot read /proc/self/exe: " + ec.message());
  return p.string();
}

Status check_args(const AblationArgs& a, const std::vector<std::string>& extras) {
  if (a.np < 1) {
    return invalid_argument("--np must be at least 1, got " + std::to_string(a.np),
                            "e.g. --np 2 (every configuration as a 2-rank MPI job)");
  }
  if (a.np > 1 && !a.from.empty()) {
    return invalid_argument("--from renders earlier results; --np has no effect with it",
                            "drop --np (the results say how many ranks they ran on)");
  }
  if (a.rounds < 1) {
    return invalid_argument("--rounds must be at least 1, got " + std::to_string(a.rounds),
                            "e.g. --rounds 3 (the median of 3 interleaved rounds)");
  }
  for (const std::string& e : extras) {
    const std::string flag = e.substr(0, e.find('='));
    if (std::find(std::begin(kOwnedFlags), std::end(kOwnedFlags), flag) != std::end(kOwnedFlags)) {
      return invalid_argument("ljperf ablation sets " + flag + " itself, per configuration",
                              "drop " + flag +
                                  "; the rows are base, +comm, +compile and "
                                  "+compile +ckpt-opt (--memory-limit sets the last one's budget)");
    }
  }
  if (!a.memory_limit.empty()) {
    LJ_RETURN_IF_ERROR(host_budget(a.memory_limit).status());
  }
  if (!a.out.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(a.out, ec) && !std::filesystem::is_directory(a.out, ec)) {
      return invalid_argument("--out " + a.out + " is a file, not a folder",
                              "give a folder (created when missing)");
    }
  }
  if (!a.from.empty() && !extras.empty()) {
    return invalid_argument("--from renders earlier results; benchmark flags (" + extras.front() +
                                ") have no effect with it",
                            "drop them, or drop --from to run the ablation");
  }
  return ok_status();
}

// How the runs start: this binary, or mpirun with its flags in front of it (--np above 1); the
// benchmark flags every run gets, and per row (several ranks) the DeepSpeed JSON setting its
// overlap_comm.
struct Launch {
  std::string mpirun;               // "" : one process
  std::vector<std::string> prefix;  // mpirun -np N [flags]
  std::vector<std::string> extras;  // the user's benchmark flags, less --deepspeed when rewritten
  std::string ds_blocking, ds_overlap;  // the JSON files ("" : one process)
};

// The path of --deepspeed in `extras` ("" when absent), and `extras` without it.
std::pair<std::string, std::vector<std::string>> take_deepspeed(
    const std::vector<std::string>& extras) {
  std::string path;
  std::vector<std::string> rest;
  for (size_t i = 0; i < extras.size(); ++i) {
    if (extras[i] == "--deepspeed" && i + 1 < extras.size()) {
      path = extras[++i];
    } else if (extras[i].rfind("--deepspeed=", 0) == 0) {
      path = extras[i].substr(12);
    } else {
      rest.push_back(extras[i]);
    }
  }
  return {path, rest};
}

// The DeepSpeed JSON of the rows: the user's file (its keys kept) with
// zero_optimization.overlap_comm set, or only that key.
StatusOr<std::string> write_ds_json(const std::string& user_file, bool overlap,
                                    const std::string& path) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!user_file.empty()) {
    LJ_ASSIGN_OR_RETURN(std::string text,
                        read_text_file(user_file, "--deepspeed takes a DeepSpeed JSON file"));
    j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false,
                                      /*ignore_comments=*/true);
    if (j.is_discarded() || !j.is_object()) {
      return invalid_argument("--deepspeed " + user_file + " is not a JSON object",
                              "give a DeepSpeed config file, as `ljperf benchmark` takes it");
    }
    if (j.contains("zero_optimization") && !j["zero_optimization"].is_object()) {
      return invalid_argument("--deepspeed " + user_file + ": zero_optimization is not an object",
                              "e.g. \"zero_optimization\": {\"stage\": 1}");
    }
  }
  j["zero_optimization"]["overlap_comm"] = overlap;
  const std::string text = j.dump(2) + "\n";
  LJ_RETURN_IF_ERROR(
      write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); }));
  return path;
}

// `--np N`: mpirun on PATH, a build with MPI, Open MPI's flags where they apply, and the rows'
// DeepSpeed files in `work`.
StatusOr<Launch> resolve_launch(const AblationArgs& a, const std::vector<std::string>& extras,
                                const WorkDir& work) {
  Launch l;
  l.extras = extras;
  if (a.np == 1) return l;
  if (!built_with_mpi()) {
    return unimplemented(
        fmt::format("ablation --np {} needs MPI, and this ljperf was built without it", a.np),
        "install an MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild, or drop --np");
  }
  l.mpirun = find_on_path("mpirun", std::getenv("PATH"));
  if (l.mpirun.empty()) {
    return not_found(
        fmt::format("ablation --np {} starts each run with mpirun: none on PATH", a.np),
        "install openmpi-bin (the launcher of " + mpi_library_version() + "), or drop --np");
  }
  l.prefix = {l.mpirun, "-np", std::to_string(a.np)};
  if (mpi_library_version().rfind("Open MPI", 0) == 0) {
    // Open MPI refuses more ranks than cores, and root, unless told (as tests/e2e/lib.sh does).
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (a.np > cores) l.prefix.push_back("--oversubscribe");
    if (geteuid() == 0) l.prefix.push_back("--allow-run-as-root");
  }
  auto [user_ds, rest] = take_deepspeed(extras);
  l.extras = rest;
  LJ_ASSIGN_OR_RETURN(l.ds_blocking,
                      write_ds_json(user_ds, false, work.path() + "/ds_blocking.json"));
  LJ_ASSIGN_OR_RETURN(l.ds_overlap, write_ds_json(user_ds, true, work.path() + "/ds_overlap.json"));
  return l;
}

// One run: `[mpirun -np N] ljperf benchmark --model M <extras> [--deepspeed F] <config args>
// --out F`, its record read back.
StatusOr<AblationRun> run_one(const std::string& exe, const AblationArgs& a, const Launch& launch,
                              const AblationConfig& c, int round, WorkDir& work) {
  const std::string stem = fmt::format("{}/round{}_{}", work.path(), round,
                                       c.name == "base" ? std::string("base") : c.name.substr(1));
  std::string file_stem = stem;
  std::replace(file_stem.begin() + static_cast<long>(work.path().size()) + 1, file_stem.end(), ' ',
               '_');
  const std::string output = file_stem + ".jsonl", log = file_stem + ".log";
  std::vector<std::string> argv = launch.prefix;
  argv.insert(argv.end(), {exe, "benchmark", "--model", a.model});
  argv.insert(argv.end(), launch.extras.begin(), launch.extras.end());
  if (!launch.mpirun.empty()) {
    argv.insert(argv.end(),
                {"--deepspeed", c.overlap_comm ? launch.ds_overlap : launch.ds_blocking});
  }
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  argv.insert(argv.end(), {"--out", output});
  LJ_ASSIGN_OR_RETURN(int status, spawn_and_wait(launch.mpirun, argv, log));
  const std::string what =
      fmt::format("{}ljperf benchmark ({}, round {})",
                  launch.mpirun.empty() ? "" : fmt::format("mpirun -np {} ", a.np), c.name, round);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    work.keep();
    const auto text = read_text_file(log);
    auto [error, hint] = child_error(text.ok() ? *text : "");
    if (WIFSIGNALED(status)) {
      error = fmt::format("killed by signal {}{}", WTERMSIG(status),
                          WTERMSIG(status) == SIGKILL ? " (out of memory?)" : "");
    }
    return invalid_argument(what + " failed: " + (error.empty() ? "see its log" : error),
                            (hint.empty() ? "" : hint + "; ") + "its output: " + log);
  }
  LJ_ASSIGN_OR_RETURN(std::string record, read_text_file(output));
  while (!record.empty() && (record.back() == '\n' || record.back() == '\r')) record.pop_back();
  if (record.find('\n') != std::string::npos) {
    return internal_error(what + " wrote more than one record to " + output);
  }
  LJ_ASSIGN_OR_RETURN(AblationRun run, run_from_benchmark_record(record, c.name, round));
  if (run.world_size != a.np) {
    work.keep();
    return internal_error(
        fmt::format("{} ran on {} rank(s), not {}", what, run.world_size, a.np),
        "is mpirun the launcher of the MPI ljperf was built with (ljperf doctor)? its output: " +
            log);
  }
  return run;
}

// The configurations × rounds, interleaved: round 1 runs every configuration, then round 2, ...
StatusOr<std::vector<AblationRun>> run_rounds(const AblationArgs& a,
                                              const std::vector<std::string>& extras,
                                              const std::vector<AblationConfig>& configs,
                                              int world_size) {
  LJ_ASSIGN_OR_RETURN(std::string exe, self_exe());
  LJ_ASSIGN_OR_RETURN(auto work, WorkDir::create());
  if (a.keep_logs) work->keep();
  LJ_ASSIGN_OR_RETURN(const Launch launch, resolve_launch(a, extras, *work));
  std::vector<const AblationConfig*> runnable;
  for (const AblationConfig& c : configs) {
    if (world_size >= c.min_world_size) runnable.push_back(&c);
  }
  const int64_t total = static_cast<int64_t>(runnable.size()) * a.rounds;
  Progress progress("ablation", "runs");
  std::vector<AblationRun> runs;
  for (int round = 1; round <= a.rounds; ++round) {
    for (const AblationConfig* c : runnable) {
      LJ_ASSIGN_OR_RETURN(AblationRun r, run_one(exe, a, launch, *c, round, *work));
      if (!progress.is_tty()) {
        fmt::print(stderr, "ablation: round {}/{} {}: {} tokens/s, peak RSS {}\n", round, a.rounds,
                   c->name, format_tokens_per_s(r.tokens_per_s), format_mib(r.peak_rss_bytes));
      }
      runs.push_back(std::move(r));
      progress.update(static_cast<int64_t>(runs.size()), total);
    }
  }
  progress.finish();
  if (a.keep_logs)
    fmt::print(stderr, "ablation: the runs' records and logs are in {}\n", work->path());
  return runs;
}

// Earlier results.json files, their rounds renumbered after one another.
StatusOr<std::vector<AblationRun>> runs_from_files(const std::vector<std::string>& files) {
  std::vector<AblationRun> all;
  int offset = 0;
  for (const std::string& f : files) {
    LJ_ASSIGN_OR_RETURN(
        std::string text,
        read_text_file(f, "--from takes results.json files of `ljperf ablation --out`"));
    LJ_ASSIGN_OR_RETURN(std::vector<AblationRun> runs, runs_from_results_json(text, f));
    int last = 0;
    for (AblationRun& r : runs) {
      last = std::max(last, r.round);
      r.round += offset;
      all.push_back(std::move(r));
    }
    offset += last;
  }
  return all;
}

Status write_text(const std::string& path, const std::string& text) {
  return write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); });
}

Status run_ablation(const AblationArgs& a) {
  const std::vector<std::string> extras = a.app->remaining();
  LJ_RETURN_IF_ERROR(check_args(a, extras));
  LJ_ASSIGN_OR_RETURN(LaunchEnv launch,
                      resolve_launch_env([](const char* k) { return std::getenv(k); }));
  if (launch.world_size > 1) {
    return invalid_argument(
        fmt::format("ljperf ablation starts its own MPI jobs; it does not run under a launcher "
                    "({}={})",
                    launch.world_size_var, launch.world_size),
        fmt::format("run `ljperf ablation --np {} ...` without mpirun/srun/torchrun",
                    launch.world_size));
  }
  int world_size = a.np;
  const std::vector<AblationConfig> configs = ablation_configs(a.memory_limit);
  std::vector<AblationRun> peers;
  if (!a.peer_results.empty()) {
    LJ_ASSIGN_OR_RETURN(
        std::string text,
        read_text_file(a.peer_results,
                       "--peer-results takes the JSON lines bench/peers/peer_train.py prints"));
    LJ_ASSIGN_OR_RETURN(peers, runs_from_peer_lines(text, a.peer_results));
  }
  std::vector<AblationRun> runs;
  if (a.from.empty()) {
    LJ_ASSIGN_OR_RETURN(runs, run_rounds(a, extras, configs, world_size));
  } else {
    LJ_ASSIGN_OR_RETURN(runs, runs_from_files(a.from));
    world_size = runs.front().world_size;
  }
  // The denominator of MFU: the peak on the threads the runs used, all ranks on this host,
  // measured now, after the runs (a host's speed moves: cli/mfu_peak.h); rendering earlier
  // results (--from), the cached figure. Either way the runs' own probes where higher.
  const int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const int threads = runs.front().threads;
  // The runs' precision: bf16 rows divide by the bf16 peak, as each run's own MFU does.
  DType precision = DType::f32;
  if (!parse_dtype(runs.front().precision, &precision) || !peak_probe_supports(precision)) {
    precision = DType::f32;
  }
  LJ_ASSIGN_OR_RETURN(
      HostPeak hp,
      host_peak(precision, world_size > 1 ? std::clamp(threads * world_size, 1, cores) : threads,
                /*remeasure=*/a.from.empty()));
  const PeakFigure peak = highest_measured_peak(
      PeakFigure{hp.flops, hp.describe(), hp.nominal_flops, hp.threads, hp.isa}, runs);
  LJ_ASSIGN_OR_RETURN(AblationReport report,
                      summarize_ablation(configs, runs, peers, world_size, peak));
  const std::string table = format_ablation_markdown(report);
  fmt::print("{}", table);
  if (a.out.empty()) return ok_status();
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) {
    return io_error("cannot create --out " + a.out + ": " + ec.message(),
                    "give a folder you can write");
  }
  nlohmann::ordered_json j;
  j["ljperf"] = LJ_VERSION;
  j["time"] = static_cast<int64_t>(std::time(nullptr));
  j.update(ablation_to_json(report));
  LJ_RETURN_IF_ERROR(write_text(a.out + "/results.json", j.dump(2) + "\n"));
  LJ_RETURN_IF_ERROR(write_text(a.out + "/table.md", table));
  LJ_RETURN_IF_ERROR(
      write_text(a.out + "/chart.svg", render_bar_chart_svg(ablation_chart(report))));
  fmt::print(stderr, "ablation: wrote {0}/results.json, {0}/table.md, {0}/chart.svg\n", a.out);
  return ok_status();
}

}  // namespace

Command add_ablation_command(CLI::App& app) {
  auto args = std::make_shared<AblationArgs>();
  CLI::App* sub = app.add_subcommand(
      "ablation",
      "The same benchmark with each optimization switched on in turn (base, +comm, +compile, "
      "+compile +ckpt-opt): tokens/s, peak memory and MFU as a table and chart");
  args->app = sub;
  sub->allow_extras();
  sub->footer(
      "Any other flag (--batch-size, --seq-len, --threads, --steps, --deepspeed, ...) is passed "
      "to every `ljperf benchmark` child; see ljperf benchmark --help. The ablation sets "
      "--compile, --ckpt-opt, --recompute* and the child's --out itself, and unsets LJ_COMPILE and "
      "CHECKPOINT_OPTIMIZATION in the children.\nRows: base = eager, no recompute, blocking "
      "collectives; +comm = bucketed collectives overlapped with backward (n/a at --np 1); "
      "+compile = --compile; +compile +ckpt-opt = --compile --ckpt-opt [--memory-limit X]; the "
      "rows below +comm keep it on.\nWith --np N (N > 1) every run is `mpirun -np N "
      "[--oversubscribe] [--allow-run-as-root] ljperf benchmark ...` (mpirun from PATH; do not "
      "start the ablation itself under mpirun), and the ablation passes each run a DeepSpeed JSON "
      "setting zero_optimization.overlap_comm (false for base, true from +comm on): your "
      "--deepspeed file's keys with that one overridden, or only that key (DeepSpeed's default "
      "reduce_bucket_size). The table adds the exposed comm per step and the overlapped share; "
      "tokens/s are summed over the ranks, peak RSS is the largest rank's.\n");
  sub->add_option("--model", args->model, "Model for every run, as benchmark takes it")
      ->capture_default_str();
  sub->add_option("--np", args->np,
                  "Ranks per run: above 1, every configuration runs as an MPI job (mpirun -np N) "
                  "and the +comm row is measured")
      ->capture_default_str();
  sub->add_option("--rounds", args->rounds,
                  "Interleaved rounds; every configuration runs once per round, the table shows "
                  "the median and the min-max spread")
      ->capture_default_str();
  sub->add_option("--memory-limit", args->memory_limit,
                  "Budget for the +ckpt-opt row, e.g. 2GiB (default: benchmark's default budget)");
  sub->add_option("--out", args->out,
                  "Folder for results.json (every round's figures and the medians), table.md and "
                  "chart.svg");
  sub->add_option("--peer-results", args->peer_results,
                  "JSON lines of peer runs (bench/peers/peer_train.py) to add as rows, with a "
                  "ratio column against the first peer");
  sub->add_option("--from", args->from,
                  "Render earlier results.json files (rounds merged) instead of running");
  sub->add_flag("--keep-logs", args->keep_logs,
                "Keep each run's benchmark output and record (the folder is printed)");
  return {sub, [args] { return run_ablation(*args); }};
}

}  // namespace lj::cli
