// The doctor's small host probes: running a tool, finding it on PATH, and whether the CPU has the
// vector extensions this binary was compiled for.
#pragma once

#include <string>

#include "cli/doctor_check.h"

namespace lj::cli {

// Runs a shell command, returning its stdout+stderr and exit status (-1 when it could not start).
std::string run_command(const std::string& command, int* exit_status);
// `s` quoted for the shell.
std::string shell_quote(const std::string& s);

// The first directory of `path_env` (a PATH value) holding an executable `name`; empty if none.
std::string find_on_path(const std::string& name, const char* path_env);

// x86 vector extensions, as the compiler was told to use them or as the host has them.
struct IsaFlags {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
};
std::string isa_names(
    const IsaFlags& isa);  // "AVX2 FMA AVX-512F", or "none of AVX2, FMA, AVX-512F"

// What this binary was compiled for (__AVX2__, __FMA__, __AVX512F__).
IsaFlags compiled_isa();

// fail when the binary uses an extension the host lacks (it would die of SIGILL in a kernel);
// ok otherwise.
CheckLine compiled_isa_check(const IsaFlags& built, const IsaFlags& host);

}  // namespace lj::cli
