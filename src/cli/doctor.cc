// `ljperf doctor`: probes the host, runs the rules of cli/doctor_*.h over what it found, and
// prints one section per subsystem (text, or one JSON object with --json). The rules are pure
// functions in their own files so they are unit-tested; this file only gathers facts and
// renders them.
#include "cli/doctor.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "backends/cpu/onednn_info.h"
#include "cli/doctor_backends.h"
#include "cli/doctor_check.h"
#include "cli/doctor_cuda.h"
#include "cli/doctor_deepspeed.h"
#include "cli/doctor_gpu.h"
#include "cli/doctor_host.h"
#include "cli/doctor_nccl.h"
#include "cli/flag_checks.h"
#include "core/units.h"
#include "dist/build_info.h"
#include "probe/host_peak.h"
#include "runtime/host.h"
#include "runtime/launch_env.h"
#include "train/capabilities.h"

namespace lj::cli {
namespace {

using json = nlohmann::json;

struct DoctorArgs {
  int gpus = -1;  // GPUs per pod; -1: the detected count
  std::string deepspeed;
  bool strict = false;
  bool json = false;
};

struct Section {
  explicit Section(std::string section_name) : name(std::move(section_name)) {}
  std::string name;
  std::vector<CheckLine> lines;
  void add(CheckLevel level, std::string text, std::string hint = {}) {
    lines.push_back({level, std::move(text), std::move(hint)});
  }
  void add(CheckLine line) { lines.push_back(std::move(line)); }
};

const char* env_or_null(const char* name) {
  return std::getenv(name);
}

Section cpu_section(const HostInfo& h, json* facts) {
  Section s{"CPU"};
  const std::string model = h.cpu_model.empty() ? "unknown CPU model" : h.cpu_model;
  const std::string clock = h.ghz > 0 ? fmt::format("{:.2f} GHz", h.ghz) : "an unknown clock";
  s.add(CheckLevel::ok, fmt::format("{}: {} logical CPUs at {}", model, h.cores, clock));
  const IsaFlags host_isa{h.avx2, h.fma, h.avx512f};
  const std::string isa = fmt::format("AVX2 {}, FMA {}, AVX-512F {}", h.avx2 ? "yes" : "no",
                                      h.fma ? "yes" : "no", h.avx512f ? "yes" : "no");
  if (h.avx2 && h.fma) {
    s.add(CheckLevel::ok, isa);
  } else {
    s.add(CheckLevel::warn, isa,
          "without AVX2 and FMA the CPU kernels use narrower vectors; expect low throughput");
  }
  s.add(compiled_isa_check(compiled_isa(), host_isa));
  const double peak_gflops = h.peak_fp32_flops() / 1e9;
  // MFU divides by the measured peak (probe/host_peak.h); the nominal one is only shown beside it.
  const std::string nominal =
      h.ghz > 0 ? fmt::format(
                      "nominal {:.1f} GFLOP/s ({} cores x {:.2f} GHz x {} FLOPs per cycle, "
                      "assumed)",
                      peak_gflops, h.cores, h.ghz, h.fp32_flops_per_cycle)
                : "no nominal figure (clock unknown)";
  // The peak of the threads a default run uses (OMP_NUM_THREADS, at most the CPUs), else all.
  const int run_threads = std::clamp(omp_get_max_threads(), 1, std::max(h.cores, 1));
  auto cached = cached_host_peak(DType::f32, run_threads);
  if (!cached && run_threads != h.cores) cached = cached_host_peak(DType::f32, h.cores);
  if (const auto& p = cached) {
    s.add(CheckLevel::ok, fmt::format("fp32 peak {} on {} threads ({}); {}", p->describe(),
                                      p->threads, p->isa, nominal));
  } else {
    s.add(CheckLevel::warn, fmt::format("fp32 peak not measured yet; {}", nominal),
          "ljperf calibrate --measure measures it (an FMA loop, under a second); benchmark does "
          "on its first run");
  }
  const int omp_threads = omp_get_max_threads();
  const char* omp_env = std::getenv("OMP_NUM_THREADS");
  const std::string omp_src = omp_env == nullptr ? "OMP_NUM_THREADS is not set"
                                                 : fmt::format("OMP_NUM_THREADS={}", omp_env);
  if (omp_threads > h.cores) {
    s.add(CheckLevel::warn,
          fmt::format("OpenMP uses {} threads on {} CPUs ({})", omp_threads, h.cores, omp_src),
          fmt::format("more threads than CPUs slows every kernel; set OMP_NUM_THREADS={} or "
                      "fewer (divided by the processes per host under MPI)",
                      h.cores));
  } else {
    s.add(CheckLevel::ok, fmt::format("OpenMP uses {} threads ({})", omp_threads, omp_src));
  }
  const std::string mem = fmt::format("memory {} total, {} available",
                                      format_bytes(static_cast<double>(h.mem_total_bytes)),
                                      format_bytes(static_cast<double>(h.mem_available_bytes)));
  if (h.mem_total_bytes > 0 && h.mem_available_bytes < 2 * kGiB) {
    s.add(CheckLevel::warn, mem,
          "little memory is free: use a smaller model or batch, or "
          "check the predicted peak with `ljperf plan`");
  } else {
    s.add(CheckLevel::ok, mem);
  }
  (*facts)["cpu"] = {{"model", h.cpu_model},
                     {"cores", h.cores},
                     {"ghz", h.ghz},
                     {"avx2", h.avx2},
                     {"fma", h.fma},
                     {"avx512f", h.avx512f},
                     // The measured peak MFU divides by (null until measured); the nominal one
                     // (cores x clock x FLOPs per cycle, assumed) beside it, named as such.
                     {"peak_fp32_gflops", cached ? json(cached->flops / 1e9) : json(nullptr)},
                     {"peak_fp32_gflops_threads", cached ? json(cached->threads) : json(nullptr)},
                     {"nominal_peak_fp32_gflops", peak_gflops},
                     {"omp_threads", omp_threads},
                     {"mem_total_bytes", h.mem_total_bytes},
                     {"mem_available_bytes", h.mem_available_bytes}};
  return s;
}

Section blas_section(const HostInfo& h, json* facts) {
  Section s{"BLAS"};
  const cpu::OneDnnInfo d = cpu::onednn_info();
  s.add(CheckLevel::ok,
        fmt::format("oneDNN {}{}, {} threading", d.version,
                    d.git_hash.empty() ? "" : " (git " + d.git_hash + ")", d.cpu_runtime));
  const std::string isa = "oneDNN's kernels use " + d.cpu_isa;
  if ((h.avx512f && !d.isa_avx512) || (h.avx2 && !d.isa_avx2)) {
    const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
    s.add(CheckLevel::warn,
          isa + fmt::format(", below this CPU's {}", h.avx512f ? "AVX-512" : "AVX2"),
          cap != nullptr ? fmt::format("DNNL_MAX_CPU_ISA={} caps it; unset it", cap)
                         : "this oneDNN build may predate the CPU; GEMMs will be slower");
  } else {
    s.add(CheckLevel::ok, isa);
  }
  (*facts)["onednn"] = {{"version", d.version}, {"cpu_isa", d.cpu_isa}, {"runtime", d.cpu_runtime}};
  return s;
}

Section mpi_section(json* facts) {
  Section s{"MPI"};
  const char* path = std::getenv("PATH");
  std::string found;
  for (const char* launcher : {"mpirun", "mpiexec", "srun"}) {
    const std::string p = find_on_path(launcher, path);
    if (!p.empty()) found += fmt::format("{}{} ({})", found.empty() ? "" : ", ", launcher, p);
  }
  s.add(CheckLevel::ok, found.empty() ? "no MPI launcher on PATH (mpirun, mpiexec, srun): "
                                        "ljperf runs as one process"
                                      : "launchers on PATH: " + found);
  // The build (dist/build_info.h) against the launcher: which MPI each is.
  const std::string library = mpi_library_version();
  std::string mpirun = find_on_path("mpirun", path);
  if (mpirun.empty()) mpirun = find_on_path("mpiexec", path);
  std::string launcher_impl;
  if (!mpirun.empty()) {
    const std::string timeout = find_on_path("timeout", path);
    int status = 0;
    const std::string out = run_command((timeout.empty() ? "" : shell_quote(timeout) + " 10 ") +
                                            shell_quote(mpirun) + " --version 2>&1",
                                        &status);
    launcher_impl = mpi_implementation(out);
  }
  s.add(mpi_launcher_check(library, mpirun, launcher_impl));
  const StatusOr<LaunchEnv> env = resolve_launch_env(env_or_null);
  if (!env.ok()) {
    s.add(CheckLevel::fail, env.status().message(), env.status().hint());
    (*facts)["launch"] = nullptr;
    return s;
  }
  if (!env->launched()) {
    s.add(CheckLevel::ok, "single process: no rank or world-size variable is set");
  } else {
    auto from = [](const std::string& var) { return var.empty() ? "default" : var; };
    s.add(CheckLevel::ok, fmt::format("rank {} of {}, local rank {} (from {}, {}, {})", env->rank,
                                      env->world_size, env->local_rank, from(env->rank_var),
                                      from(env->world_size_var), from(env->local_rank_var)));
  }
  for (const std::string& sh : env->shadowed) {
    s.add(CheckLevel::warn, "ignored: " + sh,
          "two launchers' variables disagree; unset the stale one (often an exported RANK or "
          "WORLD_SIZE left over from torchrun)");
  }
  s.add(mpi_backend_check(backend("mpi"), env->world_size));
  (*facts)["launch"] = {
      {"rank", env->rank}, {"world_size", env->world_size}, {"local_rank", env->local_rank}};
  (*facts)["mpi"] = {{"built_with_mpi", built_with_mpi()},
                     {"library", library},
                     {"launcher", mpirun},
                     {"launcher_implementation", launcher_impl}};
  return s;
}

Section gpu_section(const GpuProbe& g, json* facts) {
  Section s{"GPU"};
  json devices = json::array();
  for (const GpuDevice& d : g.gpus) {
    devices.push_back(
        {{"name", d.name}, {"driver_version", d.driver_version}, {"memory_bytes", d.memory_bytes}});
  }
  (*facts)["gpu"] = {
      {"driver_version", g.driver_version}, {"count", g.gpu_count()}, {"devices", devices}};
  const cuda::Probe cuda_probe = cuda::probe();
  (*facts)["gpu"]["cuda_runtime"] = {{"built", cuda_probe.built},
                                     {"runtime_version", cuda_probe.runtime_version},
                                     {"driver_cuda_version", cuda_probe.driver_version},
                                     {"devices", cuda_probe.device_count()},
                                     {"error", cuda_probe.error}};
  if (g.driver_version.empty() && g.gpu_count() == 0 && g.nvidia_smi_error.empty()) {
    s.add(CheckLevel::ok, "no NVIDIA GPU found; the CPU backend will be used");
    s.add(CheckLevel::ok, "for GPU hosts, the image's driver rule: " + cuda_driver_rule());
    for (CheckLine& l : cuda_runtime_lines(cuda_probe)) s.add(std::move(l));
    s.add(cuda_backend_check(backend("cuda"), 0));
    return s;
  }
  if (!g.nvidia_smi_error.empty()) {
    s.add(CheckLevel::warn, g.nvidia_smi_error,
          "nvidia-smi fails when the NVIDIA driver is not loaded or differs from its user-space "
          "libraries");
  }
  if (g.driver_version.empty()) {
    s.add(CheckLevel::warn, "no NVIDIA driver version found (/proc/driver/nvidia/version)",
          "install or load the NVIDIA driver to use the GPUs");
  } else {
    s.add(CheckLevel::ok, "NVIDIA driver " + g.driver_version);
  }
  // One line per distinct (name, memory), in order of first appearance.
  std::vector<std::pair<std::string, int>> groups;
  for (const GpuDevice& d : g.gpus) {
    const std::string key = d.memory_bytes > 0
                                ? d.name + ", " + format_bytes(static_cast<double>(d.memory_bytes))
                                : d.name;
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& p) { return p.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, 1});
    } else {
      ++it->second;
    }
  }
  for (const auto& [key, n] : groups) s.add(CheckLevel::ok, fmt::format("{} x {}", n, key));
  if (g.gpus.empty() && g.proc_gpu_count > 0) {
    s.add(CheckLevel::ok, fmt::format("{} GPUs listed in /proc/driver/nvidia/gpus (names need "
                                      "nvidia-smi)",
                                      g.proc_gpu_count));
  }
  if (g.gpu_count() == 0 && !g.driver_version.empty()) {
    s.add(CheckLevel::warn, "the NVIDIA driver is loaded but no GPU is visible",
          "in a container, pass the GPUs in (e.g. docker run --gpus all)");
  }
  if (!g.driver_version.empty()) {
    const StatusOr<int> major = parse_driver_major(g.driver_version);
    if (!major.ok()) {
      s.add(CheckLevel::warn, major.status().message(), major.status().hint());
    } else {
      int runs = 0;
      int min_driver = 0;
      std::string names;
      for (const CudaDriverRequirement& r : kCudaDriverRequirements) {
        CheckLine line = cuda_driver_check(*major, r.cuda_version);
        runs += line.level == CheckLevel::ok;
        names += (names.empty() ? "" : ", ") + std::string(r.cuda_version);
        min_driver =
            min_driver == 0 ? r.min_driver_major : std::min(min_driver, r.min_driver_major);
        s.add(std::move(line));
      }
      if (runs == 0) {
        s.add(CheckLevel::fail,
              fmt::format("driver {} runs none of the image's CUDA versions ({})", g.driver_version,
                          names),
              fmt::format("upgrade the NVIDIA driver to {} or newer", min_driver));
      }
      if (cuda::built_with_cuda()) {
        CheckLine built = cuda_driver_check(*major, cuda::cuda_build_version());
        if (built.level != CheckLevel::ok) built.level = CheckLevel::fail;
        built.text =
            "ljperf was built against CUDA " + cuda::cuda_build_version() + ": " + built.text;
        s.add(std::move(built));
      }
    }
  }
  for (CheckLine& l : cuda_runtime_lines(cuda_probe)) s.add(std::move(l));
  s.add(cuda_backend_check(backend("cuda"), g.gpu_count()));
  return s;
}

Section nccl_section(const DoctorArgs& a, const GpuProbe& g, json* facts) {
  Section s{"NCCL"};
  const bool from_flag = a.gpus >= 0;
  const int gpus_per_pod = from_flag ? a.gpus : g.gpu_count();
  s.add(
      CheckLevel::ok,
      fmt::format("{} GPU{} per pod ({})", gpus_per_pod, gpus_per_pod == 1 ? "" : "s",
                  from_flag ? "from --nproc-per-node" : "detected; --nproc-per-node N overrides"));
  const char* current = std::getenv("NCCL_SOCKET_IFNAME");
  s.add(nccl_ifname_advice(gpus_per_pod, current));
  const std::string want = recommended_nccl_ifname(gpus_per_pod);
  const std::vector<std::string> ifaces = network_interfaces();
  if (gpus_per_pod > 0 && !want.empty() && !ifaces.empty() &&
      std::find(ifaces.begin(), ifaces.end(), want) == ifaces.end()) {
    std::string list;
    for (const std::string& i : ifaces) list += (list.empty() ? "" : ", ") + i;
    s.add(CheckLevel::warn, fmt::format("this host has no interface {} (it has {})", want, list),
          "NCCL_SOCKET_IFNAME must name an interface of this host; the eth0/hpn0 advice holds "
          "inside the image's pods");
  }
  (*facts)["nccl"] = {{"gpus_per_pod", gpus_per_pod},
                      {"recommended_socket_ifname", want},
                      {"socket_ifname", current == nullptr ? json(nullptr) : json(current)}};
  return s;
}

Section deepspeed_section(const DoctorArgs& a) {
  Section s{"DeepSpeed"};
  if (a.deepspeed.empty()) {
    s.add(CheckLevel::ok,
          "no --deepspeed file given (in yours, leave "
          "zero_optimization.stage3_prefetch_bucket_size empty or \"auto\")");
  } else {
    for (CheckLine& l : deepspeed_file_advice(a.deepspeed)) s.add(std::move(l));
  }
  return s;
}

// What each device trains with (train/capabilities.h), the table every refusal reads; facts
// carry it whole ("capabilities": one object per entry).
Section capability_section(json* facts) {
  Section s{"Capabilities"};
  for (const TrainDevice d : {TrainDevice::cpu, TrainDevice::cuda}) {
    s.add(CheckLevel::ok, fmt::format("{}: {}", train_device_name(d), capability_summary(d)));
  }
  json rows = json::array();
  for (const Capability& c : capabilities()) {
    rows.push_back({{"device", train_device_name(c.device)},
                    {"feature", c.feature},
                    {"value", c.value},
                    {"supported", c.supported},
                    {"why", c.why},
                    {"hint", c.hint}});
  }
  (*facts)["capabilities"] = rows;
  return s;
}

void print_text(const std::string& hostname, const std::vector<Section>& sections,
                const std::map<CheckLevel, int>& counts) {
  fmt::print("ljperf doctor on {}\n", hostname.empty() ? "this host" : hostname);
  for (const Section& s : sections) {
    fmt::print("\n{}\n", s.name);
    for (const CheckLine& l : s.lines) {
      fmt::print("  {:<5} {}\n", check_level_name(l.level), l.text);
      if (!l.hint.empty()) fmt::print("        hint: {}\n", l.hint);
    }
  }
  fmt::print("\n{} ok, {} warn, {} fail\n", counts.at(CheckLevel::ok), counts.at(CheckLevel::warn),
             counts.at(CheckLevel::fail));
}

Status run_doctor(const DoctorArgs& a) {
  // Under a launcher, one report per host: its local rank 0 speaks for it (the others would
  // print the same probes again).
  const StatusOr<LaunchEnv> launch = resolve_launch_env(env_or_null);
  if (launch.ok() && launch->local_rank != 0) return ok_status();
  const HostInfo h = host_info();
  const GpuProbe gpus = probe_gpus();
  json facts = json::object();
  for (const BackendStatus& b : backend_status()) {
    facts["backends"][std::string(b.name)] = backend_state_name(b.state);
  }
  std::vector<Section> sections;
  sections.push_back(cpu_section(h, &facts));
  sections.push_back(blas_section(h, &facts));
  sections.push_back(mpi_section(&facts));
  sections.push_back(gpu_section(gpus, &facts));
  sections.push_back(nccl_section(a, gpus, &facts));
  sections.push_back(deepspeed_section(a));
  sections.push_back(capability_section(&facts));
  std::map<CheckLevel, int> counts{
      {CheckLevel::ok, 0}, {CheckLevel::warn, 0}, {CheckLevel::fail, 0}};
  for (const Section& s : sections) {
    for (const CheckLine& l : s.lines) ++counts[l.level];
  }
  if (a.json) {
    json out = {{"hostname", h.hostname}, {"facts", facts}};
    json js = json::array();
    for (const Section& s : sections) {
      json lines = json::array();
      for (const CheckLine& l : s.lines) {
        lines.push_back({{"level", check_level_name(l.level)}, {"text", l.text}, {"hint", l.hint}});
      }
      js.push_back({{"name", s.name}, {"checks", lines}});
    }
    out["sections"] = js;
    out["counts"] = {{"ok", counts[CheckLevel::ok]},
                     {"warn", counts[CheckLevel::warn]},
                     {"fail", counts[CheckLevel::fail]}};
    fmt::print("{}\n", out.dump());
  } else {
    print_text(h.hostname, sections, counts);
  }
  if (a.strict && counts[CheckLevel::fail] > 0) {
    return invalid_argument(
        fmt::format("doctor found {} failing check{} (--strict)", counts[CheckLevel::fail],
                    counts[CheckLevel::fail] == 1 ? "" : "s"),
        "fix the lines marked fail, or drop --strict");
  }
  return ok_status();
}

}  // namespace

Command add_doctor_command(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  CLI::App* sub = app.add_subcommand(
      "doctor",
      "Check this host (CPU, oneDNN, MPI, GPU driver, NCCL, DeepSpeed config) and advise");
  sub->add_option("--nproc-per-node", a->gpus,
                  "GPUs (ranks) per pod, torchrun's name, for the NCCL_SOCKET_IFNAME advice "
                  "(default: detected)")
      ->check(CLI::Range(0, 1024));
  add_renamed_option(sub, "--gpus", "--nproc-per-node",
                     "GPUs per pod; --np counts ranks in all pods", &a->gpus)
      ->check(CLI::Range(0, 1024));
  sub->add_option("--deepspeed", a->deepspeed,
                  "DeepSpeed JSON to check (stage3_prefetch_bucket_size)");
  sub->add_flag("--strict", a->strict, "Exit 1 when any check fails");
  sub->add_flag("--json", a->json, "Print the report as one JSON object");
  return {sub, [a] { return run_doctor(*a); }};
}

}  // namespace lj::cli
