#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   tools/setup.sh run    install what is missing, build Release, run `ljperf benchmark`
#   tools/setup.sh test   install what is missing, build, run every test with ctest (but those
#                         labelled gpu, which need a GPU: tools/gpu_check.sh runs them)
#   tools/setup.sh test-cuda  build with -DLJ_CUDA=ON (in build-cuda; needs the CUDA toolkit,
#                         which is no Debian main package: it comes with the machine image) and
#                         run the CUDA tests that need no GPU (NVRTC compiles, allocator logic)
#   tools/setup.sh gpu-rehearse  the same label, and the whole host-side part of the GPU
#                         machine's call, in a root that has what that machine has
#                         (tools/gpu_rehearse.sh; as root; what CI runs instead of test-cuda)
#   tools/setup.sh test-asan  the same tests under AddressSanitizer + UBSan, without the e2e
#                             ones, then dist_tests under mpirun and one 2-rank e2e test
#                             (LeakSanitizer skips Open MPI's own leaks:
#                             tools/sanitizers/lsan_openmpi.supp)
#   tools/setup.sh test-tsan  ThreadSanitizer (in build-tsan, built with clang) over the threads
#                             ljperf starts: the tokenize pipeline's reader and workers, the
#                             stop-signal thread (tsan_tests), and the OpenMP CPU kernels under
#                             clang's libomp with archer (tsan_omp_tests); label tsan
#   tools/setup.sh fuzz   also install clang and libFuzzer (fuzz_packages); then tools/fuzz.sh
#                         builds and runs the fuzz targets (tests/fuzz/)
#   tools/setup.sh deps   only install what is missing
# Environment: BUILD_DIR (default build; build-asan for test-asan, build-tsan for test-tsan),
# CI=true turns compiler warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."

# ocl-icd-opencl-dev: oneDNN's CMake package (dnnl-config.cmake) looks for OpenCL, yet it is only a
# Recommends of libdnnl-dev, which --no-install-recommends skips: without it configure fails on a
# fresh machine. libopenmpi-dev, openmpi-bin: the MPI backend (multi-process runs, mpirun).
# libpcre2-dev: tokenizer.json's pre-tokenizer regexes (PCRE2 with JIT); zlib1g-dev: .gz corpora
# (both for ljperf tokenize); libutf8proc-dev: the Unicode normalizers (NFC, NFKC, ...) of
# tokenizer.json (Qwen's is NFC). iproute2: `ip`, with which e2e dist_multihost_test makes its two
# "hosts" (network namespaces joined by a veth pair); minbase Debian has no `ip`. time:
# /usr/bin/time, with which bench/speed/ab.sh reads each run's CPU time (the README's A/B line,
# run by e2e readme_test).
readonly packages=(
  build-essential cmake ninja-build pkg-config libpcre2-dev zlib1g-dev libutf8proc-dev
  libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libopenmpi-dev openmpi-bin iproute2 time
  libgtest-dev libgmock-dev libbenchmark-dev
)

# Fuzzing only (tools/fuzz.sh): clang and its runtime libraries, which hold libFuzzer and the
# sanitizers' runtimes for clang (libclang-rt-14-dev is only a Recommends of clang), and xz for
# the checked-in grown corpora (tests/fuzz/grown/*.tar.xz).
readonly fuzz_packages=(clang libclang-rt-14-dev xz-utils)
# ThreadSanitizer (test-tsan): clang, its TSan runtime, and LLVM's OpenMP runtime (libomp) with
# archer, the OMPT tool that tells TSan what OpenMP's barriers order (both in libomp-14-dev).
readonly tsan_packages=(clang libclang-rt-14-dev libomp-14-dev)

# install_missing [packages...] (default: the build and test packages)
install_missing() {
  local missing=() want=("$@")
  [ ${#want[@]} -eq 0 ] && want=("${packages[@]}")
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# build [cmake -D options...] [-- targets...]
build() {
  local werror=OFF opts=() targets=()
  [ "${CI:-}" = "true" ] && werror=ON
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift && targets=(--target "$@")
  cmake -S . -B "${BUILD_DIR:-build}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLJ_WERROR="$werror" \
    -DLJ_SANITIZE="${LJ_SANITIZE:-OFF}" "${opts[@]}"
  cmake --build "${BUILD_DIR:-build}" -j "$(nproc)" "${targets[@]}"
}

case "${1:-}" in
  deps) install_missing ;;
  fuzz)
    install_missing
    install_missing "${fuzz_packages[@]}"
    ;;
  run)
    install_missing
    build
    "${BUILD_DIR:-build}"/ljperf benchmark
    ;;
  test)
    install_missing
    build
    log="${BUILD_DIR:-build}/ctest.log"
    set +e
    ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" -LE gpu 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    [ "$rc" -eq 0 ] || exit "$rc"
    # ctest counts a test that printed "SKIP: " as skipped whatever it checked. Where mpirun and
    # an MPI build are both here, a skipped multi-process test is a failure, not a pass.
    if command -v mpirun >/dev/null 2>&1 &&
      "${BUILD_DIR:-build}"/ljperf doctor --json |
      perl -MJSON::PP -e 'exit(decode_json(join "", <STDIN>)->{facts}{mpi}{built_with_mpi} ? 0 : 1)'; then
      skipped=$(grep -E '^[[:space:]]*[0-9]+ - .*dist.*\(Skipped\)' "$log" || true)
      if [ -n "$skipped" ]; then
        echo "setup.sh test: mpirun and an MPI build are here, yet these tests skipped:" >&2
        echo "$skipped" >&2
        exit 1
      fi
    fi
    ;;
  test-cuda)
    install_missing
    # The image puts the toolkit in /usr/local/cuda; a login shell adds it to PATH, CI may not.
    if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
      export PATH=/usr/local/cuda/bin:$PATH
    fi
    command -v nvcc >/dev/null || {
      echo "setup.sh test-cuda: no CUDA toolkit (nvcc) on this machine" >&2
      exit 2
    }
    # Only what the CUDA tests need: ljperf and the rest are the CPU build's, already tested.
    BUILD_DIR=${BUILD_DIR:-build-cuda} build -DLJ_CUDA=ON -DLJ_BENCH=OFF -- cuda_tests gpu_tests
    ctest --test-dir "${BUILD_DIR:-build-cuda}" --output-on-failure -j "$(nproc)" -L cuda_tests
    ;;
  gpu-rehearse)
    shift
    exec tools/gpu_rehearse.sh "$@"
    ;;
  test-asan)
    install_missing
    BUILD_DIR=${BUILD_DIR:-build-asan} LJ_SANITIZE=ON build -DLJ_BENCH=OFF -- unit_tests ops_tests \
      model_tests dist_tests ljperf
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      ctest --test-dir "${BUILD_DIR:-build-asan}" --output-on-failure -j "$(nproc)" -LE "e2e|dist"
    # The multi-process ones: dist_tests under mpirun (2 and 3 ranks, the abort and timeout
    # checks, and that a leak of ljperf code is still reported), and one e2e test of the CLI at
    # 2 ranks: `mpirun -np 2 ljperf benchmark` at ZeRO 0 to 3 (the other e2e tests stay out: the
    # sanitized build is several times slower). CMake gives them their ASan and LSan options
    # (label dist).
    log="${BUILD_DIR:-build-asan}/ctest-dist.log"
    set +e
    ctest --test-dir "${BUILD_DIR:-build-asan}" --output-on-failure -j "$(nproc)" \
      -R '^(dist\.|e2e\.dist_benchmark_test$)' 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    [ "$rc" -eq 0 ] || exit "$rc"
    # The e2e test prints "SKIP: " (a pass for ctest) without mpirun or an MPI build; dist_tests
    # ran, so both are here and a skip is a failure.
    if grep -E '^[[:space:]]*[0-9]+ - .*\(Skipped\)' "$log"; then
      echo "setup.sh test-asan: the tests above skipped under mpirun" >&2
      exit 1
    fi
    ;;
  test-tsan)
    install_missing
    install_missing "${tsan_packages[@]}"
    # clang: GCC's libgomp is not built with ThreadSanitizer, so the ordering its barriers give
    # is invisible to it and every parallel loop is reported; clang's libomp tells archer, and
    # archer tells TSan. Only what the tests need: tsan_tests (the threads ljperf starts itself,
    # on a few libraries) and tsan_omp_tests (the CPU kernels, on lj_runtime: not train/, plan/,
    # cli/). Warnings stay warnings here: the GCC build is the one that makes them errors.
    tsan_dir=${BUILD_DIR:-build-tsan}
    # A folder configured with GCC (build-tsan before the OpenMP kernels joined) starts afresh;
    # one named by BUILD_DIR is never removed.
    if [ -f "$tsan_dir/CMakeCache.txt" ] &&
      ! grep -Eq '^CMAKE_CXX_COMPILER:[A-Z]+=.*clang' "$tsan_dir/CMakeCache.txt"; then
      if [ -n "${BUILD_DIR:-}" ]; then
        echo "error: $tsan_dir was configured with another compiler than clang." \
          "hint: remove it, or set BUILD_DIR to a new folder" >&2
        exit 2
      fi
      rm -rf "$tsan_dir"
    fi
    BUILD_DIR=$tsan_dir build -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DLJ_TSAN=ON \
      -DLJ_BENCH=OFF -DLJ_WERROR=OFF -- tsan_tests tsan_omp_tests
    # tsan.omp_* set their own TSAN_OPTIONS (with archer's) in CMake.
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
      ctest --test-dir "$tsan_dir" --output-on-failure -j "$(nproc)" -L tsan
    ;;
  *)
    echo "usage: tools/setup.sh run|test|test-cuda|gpu-rehearse|test-asan|test-tsan|fuzz|deps" >&2
    exit 2
    ;;
esac
