// The doctor's host probes; see doctor_host.h.
#include "cli/doctor_host.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <string_view>

namespace lj::cli {

std::string find_on_path(const std::string& name, const char* path_env) {
  if (path_env == nullptr || name.empty()) return "";
  std::string_view rest = path_env;
  while (true) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    // An empty PATH entry is the current directory.
    const std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) return "";
    rest.remove_prefix(colon + 1);
  }
}

std::string isa_names(const IsaFlags& isa) {
  std::string out;
  if (isa.avx2) out += "AVX2";
  if (isa.fma) out += std::string(out.empty() ? "" : " ") + "FMA";
  if (isa.avx512f) out += std::string(out.empty() ? "" : " ") + "AVX-512F";
  return out.empty() ? "none of AVX2, FMA, AVX-512F" : out;
}

IsaFlags compiled_isa() {
  IsaFlags f;
#ifdef __AVX2__
  f.avx2 = true;
#endif
#ifdef __FMA__
  f.fma = true;
#endif
#ifdef __AVX512F__
  f.avx512f = true;
#endif
  return f;
}

CheckLine compiled_isa_check(const IsaFlags& built, const IsaFlags& host) {
  const IsaFlags missing{built.avx2 && !host.avx2, built.fma && !host.fma,
                         built.avx512f && !host.avx512f};
  if (missing.avx2 || missing.fma || missing.avx512f) {
    return {
        CheckLevel::fail,
        "ljperf was compiled for " + isa_names(built) + " but this CPU lacks " + isa_names(missing),
        "rebuild on this host (LJ_NATIVE=ON compiles for the build machine's CPU), or with "
        "-DLJ_NATIVE=OFF for a portable binary"};
  }
  if (!built.avx2 && !built.fma && !built.avx512f) {
    return {CheckLevel::ok, "compiled without AVX2, FMA or AVX-512F (a portable build)", ""};
  }
  return {CheckLevel::ok, "compiled for " + isa_names(built) + "; this CPU has all of them", ""};
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command, returning its stdout+stderr and exit status (-1 when it could not start).
std::string run_command(const std::string& command, int* exit_status) {
  std::string out;
  *exit_status = -1;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *exit_status = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace lj::cli
