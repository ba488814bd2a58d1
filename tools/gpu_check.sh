#!/usr/bin/env bash
# The CUDA backend on a machine with one NVIDIA GPU, in one device call (issues 16 and 32):
#   1. preflight, failing within seconds with one line that names what is missing: the build
#      tools; the dependency bundle (tools/gpu_bundle.sh's .gpu_bundle/, unpacked with dpkg -x
#      into a prefix under /tmp, never into /); NCCL (the CUDA toolkit's or the system's, else
#      PyTorch's nvidia-nccl-cu13 wheel); the GPU (nvidia-smi); then the CMake configure, before
#      anything slow;
#   2. build with -DLJ_CUDA=ON -DLJ_MPI=OFF -DLJ_BENCH=OFF for this GPU's arch (build-gpu/, all
#      cores), only the targets the phases below need;
#   3. the host-side CUDA tests (NVRTC compiles, label cuda_tests), then every CUDA kernel and the
#      tiny training step on the GPU against the CPU (gpu_tests; LJ_REQUIRE_GPU=1, so a missing GPU
#      fails instead of skipping);
#   4. benchmarks, bf16 at seq 2048, eager then compiled, llama3.2-1b first (the goals read it):
#      tokens/s, MFU against the catalog's dense bf16 peak, predicted against measured peak memory;
#   5. `ljperf train --device cuda` end to end (tests/cuda/gpu_train_cli_test.sh: SIGKILL and
#      resume bitwise, GPU <-> CPU checkpoints), ljperf doctor's GPU section;
#   6. a llama3-8b-shaped model cut to fit one GPU (12 of its 32 layers), eager and compiled; then
#      the attention kernels alone (gpu_attention_bench: sdpa forward and backward TFLOP/s at
#      llama3.2-1b's shape, batch 4, seq 2048, 32 heads, 8 kv heads, head dim 64, causal, bf16;
#      the plain kernels, LJ_CUDA_FLASH=0, as the baseline; llama3-8b's head dim 128);
#   7. a summary against the goals on an H200 (python3; jq is not needed): MFU >= 45%
#      (llama3.2-1b bf16, compiled), compile >= 1.15x eager (llama3.2-1b), predicted peak within 3%
#      of measured (worst of the runs).
# Every phase has its own time limit, cut to what is left of the budget (GPU_CHECK_BUDGET, default
# 400 s); a phase that fails, runs out of time or finds no time left is reported and the script
# goes on, then exits non-zero. The order puts what the goals need first: the budget cuts the tail.
#
# THE DEVICE CALL. Before it, here: `bash tools/gpu_bundle.sh` (10.4 MiB into .gpu_bundle/, which
# .gitignore ignores) and, to rehearse the call without a GPU, `tools/gpu_rehearse.sh` (as root;
# CI runs it: this script's --rehearsal in a Debian root with only what the device has, no
# network; `--configure-only` rehearses the first minute alone). The bundle must lie in the
# checkout the session was started in (the device tool sends that one, also when a helper calls
# from a worktree). When `status` shows a GPU lent
# (can_start_another true, budget_left_s 900), call `run` with
#   command:   bash tools/gpu_check.sh "$OUT"
#   carry:     [".gpu_bundle"]
#   timeout_s: 420
# The script stops itself after 400 s (its budget), before the call's 420. Device time: about
# 60-120 s to start the machine + at most 420 s = at most about 540 s of the 900, leaving about 360
# s for one rerun. summary.txt's last line names the phases the budget cut or that failed, as a
# GPU_CHECK_ONLY value. The rerun, best made at once, while the machine is still warm (30 s; it
# keeps the ignored build-gpu/, so configure and build take seconds):
#   command:   GPU_CHECK_ONLY="<the phases summary.txt names>" GPU_CHECK_BUDGET=<timeout_s - 20> \
#              bash tools/gpu_check.sh "$OUT"
#   carry:     [".gpu_bundle"],  timeout_s: budget_left_s - 30 (at most 360)
# then give_back. Later, on a fresh machine (none starts with under 240 s left), the same command
# with timeout_s = budget_left_s - 150 rebuilds from nothing (about 100 s, estimated) and has
# room for one or two phases only. GPU_CHECK_ONLY takes shell patterns ("bench_1b_*"); configure
# and build always run, and the build makes only the selected phases' targets.
# Measured on one H200 (2026-12-04, bench/gpu/RESULTS.md): the whole default run took 115 s of
# the call (the machine's start about 30 s more): unpack and configure 4 s, build 52-66 s (16
# cores, no ccache), cuda_tests 2 s, gpu_tests 6-7 s, the 1B benchmarks 6-7 s each, train_cli 4
# s, doctor 1 s, the 8B-shaped benchmarks 13-15 s each, the attention kernels 3 s. The extra
# phases: profile_1b_* (ncu) 35-84 s each, peer_init 9 s, peer_1b_eager 21 s, peer_1b_compiled
# 60 s (inductor's compile 38 s): all phases about 350 s of the default 400 s budget.
# What comes back under $OUT (8 files, flat; the limit is 8 files of 16 MiB, 2 folders deep):
#   summary.txt    the GPU, the NCCL and bundle used, where each dependency was found, every
#                  phase's status and seconds, the benchmark table and the goals (MET / not met)
#   results.jsonl  one line per benchmark run (ljperf benchmark --out)
#   build.log      the configure and build output
#   tests.log      cuda_tests, gpu_tests (errors each test observed), train_cli, doctor
#   bench.log      the benchmarks and the attention kernels
#   console.log    everything the script printed (the call's output_tail holds only the end)
#   peers.jsonl    PyTorch's runs of the same step on the GPU (bench/peers/peer_train.py)
#   profiles.tar.gz  Nsight Compute's per-kernel CSVs of two ljperf steps (eager, compiled)
#
# usage: tools/gpu_check.sh [--configure-only | --rehearsal] [OUT_DIR]  (default gpu_check_out/)
#   --configure-only  the preflight and the configure, then stop: rehearses the device's first
#                     minute on a machine without a GPU (the arch is then 90).
#   --rehearsal       this same path on a machine without a GPU, up to the end of the host-side
#                     part: preflight, configure, the build of every target above, the whole
#                     cuda_tests label (ctest, the flash emulation included), gpu_tests skipping
#                     cleanly (every test skipped, none failed), `ljperf doctor` starting against
#                     the bundle's libraries; then the summary, and no benchmark. The budget is
#                     then GPU_CHECK_BUDGET or 7200 s, and the build's limit the whole budget.
#                     tools/gpu_rehearse.sh runs it in a root that has what the device has (CI).
# Environment: BUILD_DIR (default build-gpu), GPU_CHECK_STEPS (benchmark steps, default 6),
# GPU_CHECK_BUDGET (seconds, default 400), GPU_CHECK_ONLY (phase patterns, default all),
# GPU_CHECK_BUNDLE (default .gpu_bundle), GPU_CHECK_WORK (scratch, default /tmp/gpu_check: the
# unpacked prefix, per-phase logs), LJ_NCCL_ROOT (an NCCL folder: include/nccl.h, lib/libnccl.so*).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
configure_only=0
rehearsal=0
case "${1:-}" in
  --configure-only) configure_only=1 && shift ;;
  --rehearsal) rehearsal=1 && shift ;;
esac
start=$(date +%s)
readonly start configure_only rehearsal
readonly out=${1:-gpu_check_out}
readonly build=${BUILD_DIR:-build-gpu}
readonly steps=${GPU_CHECK_STEPS:-6}
if [ "$rehearsal" -eq 1 ]; then
  readonly budget_s=${GPU_CHECK_BUDGET:-7200}
  readonly build_limit=$budget_s  # 2 cores and no ccache: tens of minutes
else
  readonly budget_s=${GPU_CHECK_BUDGET:-400}
  readonly build_limit=240
fi
readonly only=${GPU_CHECK_ONLY:-}
readonly bundle=${GPU_CHECK_BUNDLE:-.gpu_bundle}
readonly work=${GPU_CHECK_WORK:-/tmp/gpu_check}
readonly prefix=$work/prefix
mkdir -p "$out" || exit 2
rm -f "$out"/summary.txt "$out"/results.jsonl "$out"/build.log "$out"/tests.log "$out"/bench.log \
  "$out"/console.log "$out"/peers.jsonl "$out"/profiles.tar.gz
rm -rf "$work"
mkdir -p "$work/logs" || exit 2
exec > >(tee -a "$out/console.log") 2>&1
tee_pid=$!
# console.log complete before the call returns: close the pipe to tee and wait for it.
trap 'exec 1>&- 2>&-; wait "$tee_pid" 2>/dev/null' EXIT
failures=()
summary=$work/summary_head.txt
: >"$summary"
: >"$work/status.tsv"

elapsed() { echo $(($(date +%s) - start)); }
say() { printf '[gpu_check %3ds] %s\n' "$(elapsed)" "$*"; }
note() { say "$*"; echo "$*" >>"$summary"; }  # printed and kept for summary.txt
# die LINE: the preflight's one-line answer, then stop.
die() {
  say "PREFLIGHT FAILED: $*"
  echo "PREFLIGHT FAILED: $*" >>"$summary"
  cp "$summary" "$out/summary.txt"
  exit 2
}
# want NAME: whether GPU_CHECK_ONLY selects the phase (all when unset).
want() {
  [ -z "$only" ] && return 0
  local p
  for p in $only; do
    # shellcheck disable=SC2053  # $p is a pattern on purpose
    [[ $1 == $p ]] && return 0
  done
  return 1
}
# The file under $out that holds a phase's log (at most 8 files come back from the device).
group_of() {
  case $1 in
    configure | build) echo build ;;
    bench_* | attention_* | profile_* | peer_*) echo bench ;;
    *) echo tests ;;
  esac
}
# phase NAME SECONDS COMMAND...: runs with a time limit (at most what is left of the budget), logs
# to $work/logs/NAME.log and, as it runs, to $out/<group>.log; records its status and a failure.
phase() {
  local name=$1 limit=$2
  shift 2
  want "$name" || [ "$name" = configure ] || [ "$name" = build ] || return 0
  local left=$((budget_s - $(elapsed)))
  [ "$left" -lt "$limit" ] && limit=$left
  local glog
  glog="$out/$(group_of "$name").log"
  if [ "$limit" -le 5 ]; then
    say "$name: SKIPPED, no time left in the ${budget_s}s budget"
    printf '%s\tskipped\t0\n' "$name" >>"$work/status.tsv"
    failures+=("$name")
    return 1
  fi
  say "$name (limit ${limit}s): $*"
  printf '\n===== %s (limit %ss, at %ss): %s\n' "$name" "$limit" "$(elapsed)" "$*" >>"$glog"
  local t0 rc
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$work/logs/$name.log" >>"$glog"
  rc=${PIPESTATUS[0]}
  local took=$(($(date +%s) - t0)) status=ok
  if [ "$rc" -eq 0 ]; then
    say "$name: ok (${took}s)"
  else
    status="exit $rc"
    if [ "$rc" -eq 124 ]; then
      status="timed out"
      say "$name: TIMED OUT after ${limit}s"
    else
      say "$name: FAILED (exit $rc)"
    fi
    [ "$name" = configure ] || tail -n 25 "$work/logs/$name.log"
    failures+=("$name")
  fi
  printf '===== %s: %s after %ss\n' "$name" "$status" "$took" >>"$glog"
  printf '%s\t%s\t%s\n' "$name" "$status" "$took" >>"$work/status.tsv"
  return "$rc"
}
# configure_failure LOG: one line naming what the failed configure missed.
configure_failure() {
  local log=$1 what
  what=$(sed -n 's/.*provided by "\([^"]*\)".*/\1/p; s/.*Could NOT find \([A-Za-z0-9_]*\).*/\1/p' "$log" |
    head -n 1)
  [ -z "$what" ] && what=$(grep -A1 'required packages were not found' "$log" |
    sed -n 's/^ *- *\(.*\)/pkg-config module \1/p' | head -n 1)
  [ -z "$what" ] && grep -q 'NCCL not found' "$log" && what=NCCL
  [ -z "$what" ] && grep -q 'No CMAKE_CUDA_COMPILER could be found' "$log" && what="nvcc (CUDA compiler)"
  if [ -n "$what" ]; then
    echo "configure: missing dependency $what"
  else
    echo "configure: $(grep -m1 -A2 'CMake Error' "$log" | tr -s ' \n' ' ' | cut -c1-200)"
  fi
}

# 1. Preflight.
say "budget ${budget_s}s; out $out; scratch $work"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
missing=()
tools=(nvcc cmake ninja c++ timeout tee)
[ "$configure_only" -eq 0 ] && [ "$rehearsal" -eq 0 ] && tools+=(nvidia-smi)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] || die "missing tools: ${missing[*]} (nvidia-smi comes with the driver, \
nvcc with the CUDA toolkit; tools/setup.sh deps installs the rest where apt reaches Debian)"

# The bundle: every .deb unpacked into $prefix; the build and the binaries use that prefix.
cmake_deps=()
if [ -d "$bundle" ] && compgen -G "$bundle/*.deb" >/dev/null; then
  mkdir -p "$prefix"
  for deb in "$bundle"/*.deb; do
    if command -v dpkg-deb >/dev/null && [ -z "${GPU_CHECK_NO_DPKG:-}" ]; then
      dpkg-deb -x "$deb" "$prefix" || die "bundle: cannot unpack $deb"
    else  # no dpkg: a .deb is an ar archive whose data.tar.* holds the files
      absdeb=$(readlink -f "$deb")
      (cd "$work" && ar x "$absdeb" && tar -xf data.tar.* -C "$prefix" &&
        rm -f data.tar.* control.tar.* debian-binary) || die "bundle: cannot unpack $deb (no dpkg)"
    fi
  done
  # Links that point at an absolute path (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) point
  # into the prefix instead.
  while IFS= read -r link; do
    target=$(readlink "$link")
    [ -e "$prefix$target" ] && ln -sfn "$prefix$target" "$link"
  done < <(find "$prefix" -type l -lname '/*')
  # pkg-config files name /usr: the prefix's /usr instead. The CMake package files (dnnl, fmt,
  # GTest, CLI11, nlohmann_json) find their prefix from their own folder and need no change.
  find "$prefix" -name '*.pc' -exec sed -i -E \
    "s#^(prefix|exec_prefix|libdir|includedir|sharedlibdir)=/usr#\\1=$prefix/usr#" {} +
  p=$prefix/usr
  multi=lib/x86_64-linux-gnu
  # No CPATH or LIBRARY_PATH: the compiler would report those folders as its own, and CMake
  # would then leave them out of the include flags and the RPATH, so the build would hold only
  # while this environment lasts. The imported targets carry the prefix's paths instead.
  export CMAKE_PREFIX_PATH=$p${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=$p/$multi:$prefix/$multi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_LIBDIR=$p/$multi/pkgconfig:$p/share/pkgconfig
  # Each package named, so a compiler without Debian's multiarch folders finds them too; only
  # what is there (FindZLIB and FindOpenCL take a named file on trust: a missing one must fail
  # the configure, not the build).
  hint() { [ -e "$3" ] && cmake_deps+=("-D$1=$2"); return 0; }  # hint VAR VALUE FILE-THAT-MUST-EXIST
  hint dnnl_DIR "$p/$multi/cmake/dnnl" "$p/$multi/cmake/dnnl/dnnl-config.cmake"
  hint fmt_DIR "$p/$multi/cmake/fmt" "$p/$multi/cmake/fmt/fmt-config.cmake"
  hint GTest_DIR "$p/$multi/cmake/GTest" "$p/$multi/cmake/GTest/GTestConfig.cmake"
  hint CLI11_DIR "$p/share/cmake/CLI11" "$p/share/cmake/CLI11/CLI11Config.cmake"
  hint nlohmann_json_DIR "$p/share/cmake/nlohmann_json" "$p/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake"
  hint PKG_CONFIG_EXECUTABLE "$p/bin/pkgconf" "$p/bin/pkgconf"
  hint ZLIB_INCLUDE_DIR "$p/include" "$p/include/zlib.h"
  hint ZLIB_LIBRARY "$p/$multi/libz.so" "$p/$multi/libz.so"
  hint OpenCL_INCLUDE_DIR "$p/include" "$p/include/CL/cl.h"
  hint OpenCL_LIBRARY "$p/$multi/libOpenCL.so" "$p/$multi/libOpenCL.so"
  if [ -x "$p/bin/pkgconf" ]; then
    "$p/bin/pkgconf" --exists libpcre2-8 ||
      die "bundle: missing dependency libpcre2-8 (libpcre2-dev), or its pkgconf does not run"
  fi
  note "bundle: $(find "$bundle" -name '*.deb' | wc -l) packages from $bundle unpacked into $prefix ($(du -sh "$prefix" | cut -f1))"
else
  note "bundle: none ($bundle/*.deb absent): the build uses this machine's packages"
fi

# NCCL: LJ_NCCL_ROOT when set; else the CUDA toolkit's or the system's (CMake's default search);
# else PyTorch's nvidia-nccl-cu13 wheel (a namespace package: nvidia.nccl.__file__ is None, its
# __path__ holds include/ and lib/libnccl.so.2).
cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
# NVRTC (the fused kernels, cuda_tests' compiles) dlopens libnvrtc-builtins.so.<version> by name,
# which only the loader's own search finds: the toolkit's lib folder must be on the library path
# unless ldconfig knows it (this machine's image does; a clean root did not, and NVRTC failed).
for d in "$cuda_root/lib" "$cuda_root/lib64" "$cuda_root/targets/x86_64-linux/lib"; do
  if compgen -G "$d/libnvrtc-builtins.so*" >/dev/null; then
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
    break
  fi
done
# has_nccl INCLUDE_DIR LIB_DIR...: nccl.h in the first, libnccl.so* in one of the others.
has_nccl() {
  local inc=$1 d
  shift
  [ -f "$inc/nccl.h" ] || return 1
  for d in "$@"; do compgen -G "$d/libnccl.so*" >/dev/null && return 0; done
  return 1
}
nccl_root=${LJ_NCCL_ROOT:-}
nccl_from="LJ_NCCL_ROOT"
if [ -z "$nccl_root" ]; then
  if has_nccl "$cuda_root/include" "$cuda_root/lib" "$cuda_root/lib64" ||
    has_nccl "$cuda_root/targets/x86_64-linux/include" "$cuda_root/targets/x86_64-linux/lib" ||
    has_nccl /usr/include /usr/lib/x86_64-linux-gnu; then
    nccl_from="the CUDA toolkit's or the system's folders"
  elif command -v python3 >/dev/null &&
    nccl_root=$(timeout 30 python3 -c '
import os, sys
try:
    import nvidia.nccl as m
except Exception:
    sys.exit(1)
paths = list(getattr(m, "__path__", []))
if getattr(m, "__file__", None):
    paths.append(os.path.dirname(m.__file__))
for p in paths:
    lib = os.path.join(p, "lib")
    if os.path.isdir(lib) and any(f.startswith("libnccl.so") for f in os.listdir(lib)):
        print(p)
        sys.exit(0)
sys.exit(1)' 2>/dev/null) && [ -n "$nccl_root" ]; then
    nccl_from="PyTorch's nvidia-nccl wheel"
  else
    nccl_root=""
    die "NCCL: no nccl.h and libnccl.so* in $cuda_root or /usr, and python3 has no nvidia.nccl (PyTorch's nvidia-nccl-cu13); set LJ_NCCL_ROOT"
  fi
fi
nccl_flags=()
if [ -n "$nccl_root" ]; then
  if [ ! -f "$nccl_root/include/nccl.h" ]; then
    # No header beside the library: a folder of our own with the bundle's nccl.h and links to the
    # libraries.
    [ -f "$bundle/nccl/include/nccl.h" ] ||
      die "NCCL: $nccl_root has no include/nccl.h and the bundle no fallback header"
    mkdir -p "$work/nccl/include" "$work/nccl/lib"
    cp "$bundle/nccl/include/nccl.h" "$work/nccl/include/"
    for l in "$nccl_root"/lib/libnccl.so*; do ln -sfn "$(readlink -f "$l")" "$work/nccl/lib/$(basename "$l")"; done
    note "NCCL: $nccl_root has no nccl.h: the bundle's header ($work/nccl)"
    nccl_root=$work/nccl
  fi
  nccl_flags=(-DLJ_NCCL_ROOT="$nccl_root")
  export LD_LIBRARY_PATH=$nccl_root/lib:${LD_LIBRARY_PATH:-}
fi

arch=${GPU_CHECK_ARCH:-}
if [ "$configure_only" -eq 0 ] && [ "$rehearsal" -eq 0 ]; then
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader \
    >"$work/gpu.txt" 2>&1 || die "nvidia-smi: $(head -c 300 "$work/gpu.txt")"
  note "GPU: $(head -n 1 "$work/gpu.txt")"
  [ -n "$arch" ] || arch=$(head -n 1 "$work/gpu.txt" | awk -F', ' '{print $NF}' | tr -d ' .')
fi
[ -n "$arch" ] || arch=90
note "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ($cuda_root), arch sm_$arch"

# 2. Configure (fails fast, naming what is missing), then build only what the phases need.
# Warnings are errors in CI's rehearsal (CI=true), as in its other builds; never on the device,
# whose compiler may warn where this one does not.
werror=OFF
[ "$rehearsal" -eq 1 ] && [ "${CI:-}" = true ] && werror=ON
if ! phase configure 60 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLJ_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLJ_BENCH=OFF -DLJ_TESTS=ON -DLJ_MPI=OFF \
  -DLJ_WERROR="$werror" "${cmake_deps[@]}" "${nccl_flags[@]}"; then
  die "$(configure_failure "$work/logs/configure.log") (see build.log)"
fi
cache() { sed -n "s|^$1:[A-Z]*=||p" "$build/CMakeCache.txt" | head -n 1; }
nccl_lib=$(cache LJ_NCCL_LIBRARY)
nccl_inc=$(cache LJ_NCCL_INCLUDE_DIR)
nccl_version=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$nccl_inc/nccl.h" 2>/dev/null | paste -sd.)
note "NCCL ${nccl_version:-?}: $nccl_lib (header $nccl_inc/nccl.h; from $nccl_from)"
{
  echo "dependencies found by the configure:"
  for v in dnnl_DIR fmt_DIR CLI11_DIR nlohmann_json_DIR GTest_DIR pkgcfg_lib_PCRE2_pcre2-8 pkgcfg_lib_UTF8PROC_utf8proc \
    PKG_CONFIG_EXECUTABLE ZLIB_LIBRARY OpenCL_LIBRARY LJ_NCCL_LIBRARY CMAKE_CUDA_COMPILER; do
    printf '  %-26s %s\n' "$v" "$(cache "$v")"
  done
} | tee -a "$summary"
if [ "$configure_only" -eq 1 ]; then
  say "configure only: done in $(elapsed) s"
  cp "$summary" "$out/summary.txt"
  exit 0
fi

targets=()
want cuda_tests && targets+=(cuda_tests)
want gpu_tests && targets+=(gpu_tests)
for t in bench_1b_eager bench_1b_compiled train_cli doctor bench_8b12l_eager bench_8b12l_compiled \
  profile_1b_eager profile_1b_compiled peer_init peer_1b_eager peer_1b_compiled; do
  want "$t" && { targets+=(ljperf); break; }
done
for t in attention_1b attention_1b_plain attention_8b; do
  want "$t" && { targets+=(gpu_attention_bench); break; }
done
[ ${#targets[@]} -gt 0 ] || targets=(ljperf)
phase build "$build_limit" cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
built=0
for t in "${targets[@]}"; do [ -x "$build/$t" ] && built=1; done
if [ "$built" -eq 0 ]; then
  say "no binary was built: stopping (see build.log)"
  { cat "$summary"; echo; cat "$work/status.tsv"; } >"$out/summary.txt"
  exit 1
fi

# 3. Tests: the host-side CUDA tests (the flash-attention host emulation, about 20 s, is CI's);
#    every CUDA kernel and the tiny training step against the CPU (the binary itself, not ctest,
#    so its log keeps the errors each test observed: the numbers to set tolerances from).
if [ "$rehearsal" -eq 1 ]; then
  # No GPU here: the whole cuda_tests label (what CI ran as `tools/setup.sh test-cuda`), the gpu
  # tests skipping cleanly, and the binary starting against the bundle's libraries.
  [ -x "$build/cuda_tests" ] &&
    phase cuda_tests 1800 ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -L cuda_tests
  if [ -x "$build/gpu_tests" ]; then
    # shellcheck disable=SC2016  # expanded by the phase's own bash
    phase gpu_tests_skip 120 bash -c '"$1" 2>&1 | tee "$2"; rc=${PIPESTATUS[0]}
      ran=$(sed -n "s/^\[==========\] \([0-9]*\) tests\? from .* ran.*/\1/p" "$2")
      skipped=$(sed -n "s/^\[  SKIPPED \] \([0-9]*\) tests\?, listed below.*/\1/p" "$2")
      echo "gpu_tests without a GPU: exit $rc, ${ran:-?} ran, ${skipped:-0} skipped"
      [ "$rc" -eq 0 ] && [ -n "$ran" ] && [ "$ran" -gt 0 ] && [ "${skipped:-0}" -eq "$ran" ] &&
        ! grep -q "^\[  FAILED  \]" "$2"' _ "$build/gpu_tests" "$work/gpu_tests_skip.txt"
    tail -n 1 "$work/logs/gpu_tests_skip.log" | tee -a "$summary"
  fi
  [ -x "$build/ljperf" ] && phase doctor 60 "$build/ljperf" doctor &&
    sed -n '/^GPU/,/^$/p' "$work/logs/doctor.log"
  {
    cat "$summary"
    echo
    echo "phase	status	seconds"
    cat "$work/status.tsv"
    echo
    echo "rehearsal (no GPU) done in $(elapsed) s${failures[*]:+; failed: ${failures[*]}}"
  } >"$out/summary.txt"
  cat "$out/summary.txt"
  [ ${#failures[@]} -eq 0 ] || exit 1
  exit 0
fi
export LJ_REQUIRE_GPU=1
if [ -x "$build/cuda_tests" ]; then
  phase cuda_tests 30 "$build/cuda_tests" --gtest_filter=-FlashEmulation.*
fi
if [ -x "$build/gpu_tests" ] && want gpu_tests; then
  phase gpu_tests 120 "$build/gpu_tests"
  grep -E "max \|err\||worst output error|worst step|^\[  (PASSED|FAILED)  \] [0-9]" \
    "$work/logs/gpu_tests.log" | head -n 60
fi

# 4. Benchmarks the goals read. The 8B-shaped model: llama3-8b's shapes with 12 layers (3.67B
#    parameters; `ljperf plan` predicts 62 GiB on an H200 at batch 1 x 2048).
results="$out/results.jsonl"
cut8b="$work/llama3-8b-12l"
mkdir -p "$cut8b"
cat >"$cut8b/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
 "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 12,
 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
 "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
 "tie_word_embeddings": false, "hidden_act": "silu", "initializer_range": 0.02}
JSON
# Limits: the host-side work of a run (tools/gpu_host_parts.sh measured it here with the CPU
# build, 2026-12-04, on this 2-vCPU host under other builds' load) scaled to the device's 16
# cores, plus the device's own parts estimated, times the margin named:
#   - parameter initialisation (train/train_step.cc: a Box-Muller normal per weight in double, on
#     every thread) ran at 5.2 M weights/s on one thread here (1.27B of the 8B shapes' weights in
#     245 s; 2 threads under load: 3.2 M/s each). At that rate on 16 threads: llama3.2-1b's 1.24B
#     take 15 s, the 8B-shaped model's 3.67B 44 s. Each benchmark process initialises its own.
#   - the graph and the memory prediction: 0.04-0.15 s (`plan --recompute none`); not a factor.
#   - the device's share, estimated (no GPU here): CUDA context and cuBLASLt 3 s, the pageable
#     uploads of the f32 weights one by one (4.9 GB and 14.7 GB at about 5 GB/s: 1 s, 3 s), NVRTC
#     for the compiled runs 3 s, GPU_CHECK_STEPS + 2 steps of 0.1-0.2 s plus 2 s of first-step
#     set-up.
# llama3.2-1b: 15 + 3 + 1 + 3 + 4 = 26 s, limit 60 s (2.3x). The 8B-shaped model: 44 + 3 + 3 + 3
# + 4 = 57 s, limit 90 s (1.6x: the initialisation is measured, and likely slower here than on
# the device's unloaded cores).
readonly limit_bench_1b=60 limit_bench_8b=90
bench() {  # bench NAME MODEL BATCH LIMIT [--compile]
  local name=$1 model=$2 batch=$3 limit=$4
  shift 4
  want "bench_$name" || return 0
  [ -x "$build/ljperf" ] || { say "bench_$name: no ljperf binary"; failures+=("bench_$name"); return 1; }
  phase "bench_$name" "$limit" "$build/ljperf" benchmark --device cuda --model "$model" \
    --precision bf16 --batch-size "$batch" --seq-len 2048 --steps "$steps" --skip-steps 2 \
    --out "$results" "$@"
  grep -E "tokens/s|MFU|peak memory|predicted|step time|loss |CUDA graphs" "$work/logs/bench_$name.log"
}
bench 1b_eager llama3.2-1b 4 "$limit_bench_1b"
bench 1b_compiled llama3.2-1b 4 "$limit_bench_1b" --compile

# 5. Training from the command line, then the doctor's GPU section.
if [ -x "$build/ljperf" ]; then
  if want train_cli; then
    # Limit: its runs with --device cpu (tools/gpu_host_parts.sh) took here 4.9 s (start to the
    # first checkpoint), 5.1 s (the CPU's 5-step resume, which runs on the device's CPU too) and
    # 9.6 s (the 5-step resume that runs on the GPU there), steps included; the 200-step runs
    # 57-94 s, nearly all CPU compute that the GPU does in about 1-3 s. On the device: 4 GPU
    # processes of about 5 s of host work, 3 s of CUDA set-up each, 2 x 40 checkpoints of 7 MB,
    # 2 x (200 steps + 10 evaluations) at 1-3 ms a kernel-launch-bound step, NVRTC once 3 s, the
    # CPU resume 5 s: about 48 s. Limit 90 s (1.9x; the GPU part is estimated).
    phase train_cli 90 bash tests/cuda/gpu_train_cli_test.sh "$build/ljperf" "$PWD"
    grep -E "^(  ok|FAIL|SKIP|KNOWN)" "$work/logs/train_cli.log" | head -n 20
  fi
  if want doctor; then
    phase doctor 20 "$build/ljperf" doctor
    sed -n '/^GPU/,/^$/p' "$work/logs/doctor.log"
  fi
fi

# 6. The 8B-shaped model, then the attention kernels alone (FLOPs as graph/cost.cc counts them),
#    last: the budget cuts these first.
bench 8b12l_eager "$cut8b/config.json" 1 "$limit_bench_8b"
bench 8b12l_compiled "$cut8b/config.json" 1 "$limit_bench_8b" --compile
if [ -x "$build/gpu_attention_bench" ]; then
  phase attention_1b 30 "$build/gpu_attention_bench" --batch 4 --heads 32 --kv-heads 8 \
    --seq 2048 --head-dim 64 && cat "$work/logs/attention_1b.log"
  phase attention_1b_plain 60 env LJ_CUDA_FLASH=0 "$build/gpu_attention_bench" --batch 4 \
    --heads 32 --kv-heads 8 --seq 2048 --head-dim 64 --iters 2 && cat "$work/logs/attention_1b_plain.log"
  phase attention_8b 30 "$build/gpu_attention_bench" --batch 1 --heads 32 --kv-heads 8 \
    --seq 2048 --head-dim 128 && cat "$work/logs/attention_8b.log"
fi

# 7. Where the GPU's time goes in ljperf's step, kernel by kernel: Nsight Compute with one metric
#    (each kernel's duration; clocks left alone), two steps of llama3.2-1b, summed by
#    tools/gpu_kernel_profile.py (the CSVs come back in profiles.tar.gz). Then the same step in
#    PyTorch on this GPU: bench/peers/peer_train.py --device cuda (transformers' LlamaForCausalLM
#    with `ljperf init`'s config and weights, sdpa, autocast bf16, AdamW, each step synchronized),
#    eager then torch.compile; its JSON lines go to peers.jsonl. Limits estimated (no run yet):
#    ncu's per-launch overhead, a few ms, over about 5,500 launches; the peer's 5 GB load and 6
#    steps, and inductor's compile of 16 layers, 60-100 s on 16 cores.
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
profile() {  # profile NAME MODEL BATCH LIMIT [--compile]
  local name=$1 model=$2 batch=$3 limit=$4
  shift 4
  want "profile_$name" || return 0
  if [ -z "$ncu_bin" ] || [ ! -x "$build/ljperf" ]; then
    say "profile_$name: no ncu or no ljperf binary"
    failures+=("profile_$name")
    return 1
  fi
  phase "profile_$name" "$limit" "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum \
    --csv --page raw --print-units base --log-file "$work/ncu_$name.csv" "$build/ljperf" \
    benchmark --device cuda --model "$model" --precision bf16 --batch-size "$batch" \
    --seq-len 2048 --steps 2 --skip-steps 1 "$@"
  grep -E "step time|kernels a step" "$work/logs/profile_$name.log"
  [ -s "$work/ncu_$name.csv" ] &&
    python3 tools/gpu_kernel_profile.py "$work/ncu_$name.csv" --steps 2 |
    tee -a "$work/logs/profile_$name.log" "$out/bench.log"
}
peer() {  # peer NAME LIMIT [--compile]
  local name=$1 limit=$2
  shift 2
  want "peer_$name" || return 0
  [ -f "$work/llama3.2-1b-hf/config.json" ] || return 1
  phase "peer_$name" "$limit" env PYTHONUNBUFFERED=1 python3 bench/peers/peer_train.py \
    --model-dir "$work/llama3.2-1b-hf" --device cuda --precision bf16 --batch-size 4 \
    --seq-len 2048 --steps "$steps" --warmup-steps 2 "$@"
  grep '^{' "$work/logs/peer_$name.log" | tail -n 1 | tee -a "$out/peers.jsonl"
}
profile 1b_eager llama3.2-1b 4 100
if [ -x "$build/ljperf" ] && { want peer_init || want peer_1b_eager || want peer_1b_compiled; }; then
  phase peer_init 60 "$build/ljperf" init --model llama3.2-1b --out "$work/llama3.2-1b-hf"
fi
peer 1b_eager 90
profile 1b_compiled llama3.2-1b 4 100 --compile
peer 1b_compiled 180 --compile
ls "$work"/ncu_*.csv >/dev/null 2>&1 && tar czf "$out/profiles.tar.gz" -C "$work" \
  $(cd "$work" && ls ncu_*.csv)

# 8. Summary against the goals (python3, which the device has; the JSONL is the record either way).
goals() {
  python3 - "$results" <<'PY'
import json, sys
rows = []
try:
    with open(sys.argv[1]) as f:
        rows = [json.loads(line) for line in f if line.strip()]
except OSError:
    pass
if not rows:
    print("no benchmark results: the goals cannot be read")
    sys.exit(0)
gib = 1 << 30
print("model\tmode\ttokens/s\tMFU%\tmeasured GiB\tpredicted GiB")
for r in rows:
    print("%s\t%s\t%d\t%.1f\t%.2f\t%.2f" % (r.get("model"), "compiled" if r.get("compile") else "eager",
          r.get("tokens_per_s", 0), 100 * r.get("mfu", 0), r.get("bytes_device_used", 0) / gib,
          r.get("bytes_predicted", 0) / gib))
def first(model, compiled):
    for r in rows:
        if r.get("model") == model and bool(r.get("compile")) == compiled:
            return r
    return None
c, e = first("llama3.2-1b", True), first("llama3.2-1b", False)
if c:
    mfu = c.get("mfu", 0)
    print("goal MFU >= 45%% (llama3.2-1b, compiled): %.1f%% %s" % (100 * mfu, "MET" if mfu >= 0.45 else "not met"))
else:
    print("goal MFU >= 45% (llama3.2-1b, compiled): no run")
if c and e and e.get("tokens_per_s"):
    s = c["tokens_per_s"] / e["tokens_per_s"]
    print("goal compile >= 1.15x eager (llama3.2-1b): %.2fx %s" % (s, "MET" if s >= 1.15 else "not met"))
else:
    print("goal compile >= 1.15x eager (llama3.2-1b): needs both runs")
errs = [abs(r["bytes_predicted"] - r["bytes_device_used"]) / r["bytes_device_used"]
        for r in rows if r.get("bytes_predicted", 0) > 0 and r.get("bytes_device_used", 0) > 0]
if errs:
    print("goal predicted peak within 3%%: worst %.2f%% over %d runs %s" % (100 * max(errs), len(errs),
          "MET" if max(errs) <= 0.03 else "not met"))
else:
    print("goal predicted peak within 3%: no run measured it")
PY
}
say "results: $results"
{
  cat "$summary"
  echo
  echo "phase	status	seconds"
  cat "$work/status.tsv"
  echo
  if command -v python3 >/dev/null; then
    goals
  elif command -v jq >/dev/null && [ -s "$results" ]; then
    jq -r '[.model, (if .compile then "compiled" else "eager" end), .tokens_per_s, .mfu,
            .bytes_device_used, .bytes_predicted] | @tsv' "$results"
  else
    echo "no python3 or jq: read results.jsonl"
  fi
  echo
  echo "done in $(elapsed) s of the ${budget_s}s budget${failures[*]:+; failed or cut: ${failures[*]}}"
  rerun=$(printf '%s\n' "${failures[@]}" | grep -vxE 'configure|build|' | paste -sd' ')
  [ -z "$rerun" ] || echo "rerun: GPU_CHECK_ONLY=\"$rerun\""
} >"$out/summary.txt"
cat "$out/summary.txt"
if [ ${#failures[@]} -gt 0 ]; then
  exit 1
fi
