#!/usr/bin/env bash
# Fuzzes every parser of files from other people (tests/fuzz/, issue 18):
#   tools/fuzz.sh [--jobs N] [--only "T1 T2 ..."] [SECONDS]
#   tools/fuzz.sh --replay [--jobs N]
#   tools/fuzz.sh --save
# --only: these targets alone (names as in tests/fuzz/<name>_fuzz.cc), e.g. for a long campaign
# split over several sittings: tools/fuzz.sh --jobs 2 --only "tokenizer hf_config" 3600.
# builds the libFuzzer targets with clang in build-fuzz (LJ_FUZZ=ON), then runs each target for
# SECONDS (default 60), N targets at a time (default 1; CI passes $(nproc)). The grown corpus
# lives outside the repository, in ${LJ_FUZZ_CORPUS:-${XDG_CACHE_HOME:-~/.cache}/ljperf/fuzz}/<target>,
# seeded from tests/fuzz/corpus/<target> (and, for the tokenizer, the tokenizer.json fixtures)
# and from tests/fuzz/grown/<target>.tar.xz: what earlier long runs found beyond the seeds, merged
# down to the inputs that add coverage, so a short run (CI's 60 s) starts where they stopped.
# Prints per target: executions, coverage (cov/ft from -print_final_stats=1), corpus size, wall
# and CPU seconds, and findings; exits non-zero on any finding. A finding's input is kept under
# <corpus root>/findings/<target>/ (crash-*, leak-*, timeout-*, oom-*) — turn it into a unit test.
# --replay: every target runs each input of its checked-in seed and grown corpora once
# (libFuzzer -runs=0) and nothing more — deterministic, seconds, and it fails on any crash or
# sanitizer report. CI explores instead (.ci/run: --jobs $(nproc) 60); longer runs by hand.
# --save: after a long run, merges each target's grown corpus (the cache) with the seeds and the
# checked-in grown inputs (libFuzzer -merge=1), and rewrites tests/fuzz/grown/<target>.tar.xz with
# the inputs that add coverage beyond the seeds; prints files and bytes per target. Commit them.
# Environment: BUILD_DIR (default build-fuzz), CXX (default clang++), LJ_FUZZ_BYTES_ONLY=1 (the
# JSON targets without their structure-aware mutator, tests/fuzz/json_mutator.h: for an A/B).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=1
seconds=60
replay=0
save=0
only=
while [ $# -gt 0 ]; do
  case "$1" in
    --replay) replay=1; shift ;;
    --save) save=1; shift ;;
    --only) only=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --jobs=*) jobs=${1#--jobs=}; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) seconds=$1; shift ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ && "$seconds" =~ ^[1-9][0-9]*$ ]] || {
  echo "usage: tools/fuzz.sh [--jobs N] [SECONDS]" >&2
  exit 2
}

build=${BUILD_DIR:-build-fuzz}
root=${LJ_FUZZ_CORPUS:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/ljperf/fuzz}

targets=()
for src in tests/fuzz/*_fuzz.cc; do
  name=$(basename "$src" _fuzz.cc)
  [ -z "$only" ] || [[ " $only " == *" $name "* ]] || continue
  targets+=("$name")
done
[ ${#targets[@]} -gt 0 ] || {
  echo "error: --only '$only' names no target (hint: the names of tests/fuzz/*_fuzz.cc without _fuzz.cc)" >&2
  exit 2
}
cmake -S . -B "$build" -G Ninja -DLJ_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="${CXX:-clang++}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_targets

# copy_seeds NAME DIR: the target's checked-in seeds into DIR (existing files kept): its corpus
# folder, and for the tokenizer the tokenizer.json fixtures.
copy_seeds() {
  local seeds=(tests/fuzz/corpus/"$1")
  [ "$1" = tokenizer ] && seeds+=(tests/fixtures/tokenize)
  for d in "${seeds[@]}"; do
    find "$d" -maxdepth 1 -type f \( -name '*tokenizer.json' -o ! -path '*/tokenize/*' \) \
      -exec cp -n -t "$2" {} +
  done
}

# run_target NAME: fuzzes one target for $seconds; writes $log_dir/NAME.log and NAME.rc.
run_target() {
  local name=$1 corpus=$root/$name findings=$root/findings/$name
  # Replay: a corpus of the seeds alone, in the run's own temporary folder.
  [ "$replay" -eq 1 ] && corpus=$log_dir/corpus-$name
  mkdir -p "$corpus" "$findings"
  # Seeds go into the grown corpus (libFuzzer merges, keeping what adds coverage on later runs).
  copy_seeds "$name" "$corpus"
  [ -f "tests/fuzz/grown/$name.tar.xz" ] &&
    tar -C "$corpus" --skip-old-files -xJf "tests/fuzz/grown/$name.tar.xz"
  local dict=()
  [ -f tests/fuzz/$name.dict ] && dict=(-dict=tests/fuzz/$name.dict)
  # -rss_limit_mb: memory is bounded by the limits (docs/limits.md), far below this.
  # -timeout: one input taking 10 s is a finding (a hostile file must not hang a parser).
  local rc=0 t0 length=(-max_total_time="$seconds")
  [ "$replay" -eq 1 ] && length=(-runs=0)
  t0=$(date +%s)
  # CPU seconds (user + system) as /usr/bin/time reads them, where it is installed.
  local timer=()
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -f '%U %S' -o "$log_dir/$name.cpu")
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "${timer[@]}" "$build/tests/fuzz/${name}_fuzz" "$corpus" "${dict[@]}" "${length[@]}" \
    -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    -artifact_prefix="$findings/" >"$log_dir/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$log_dir/$name.rc"
  echo $(($(date +%s) - t0)) >"$log_dir/$name.sec"
  # Keep the cache small: merge the grown corpus down to the inputs that give its coverage
  # (seconds; every input runs once). Skipped after a finding, whose corpus is kept as it is.
  if [ "$rc" -eq 0 ] && [ "$replay" -eq 0 ]; then
    rm -rf "$corpus.min" && mkdir -p "$corpus.min"
    if "$build/tests/fuzz/${name}_fuzz" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
      "$corpus.min" "$corpus" >"$log_dir/$name.merge.log" 2>&1; then
      rm -rf "$corpus" && mv "$corpus.min" "$corpus"
    else
      rm -rf "$corpus.min"
    fi
  fi
}

# save_target NAME: rewrites tests/fuzz/grown/NAME.tar.xz from the cache (see --save above).
save_target() {
  local name=$1 work
  work=$(mktemp -d)
  mkdir -p "$work/seeds" "$work/all" tests/fuzz/grown
  copy_seeds "$name" "$work/seeds"
  cp -t "$work/all" "$work/seeds"/*
  local sources=("$root/$name")
  if [ -f "tests/fuzz/grown/$name.tar.xz" ]; then
    mkdir -p "$work/old" && tar -C "$work/old" -xJf "tests/fuzz/grown/$name.tar.xz"
    sources+=("$work/old")
  fi
  [ -d "$root/$name" ] || mkdir -p "$root/$name"
  # Into a folder that holds the seeds, -merge=1 adds only the inputs that bring new features.
  "$build/tests/fuzz/${name}_fuzz" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    "$work/all" "${sources[@]}" >"$work/merge.log" 2>&1 ||
    { tail -5 "$work/merge.log"; rm -rf "$work"; return 1; }
  (cd "$work/all" && comm -13 <(ls "$work/seeds" | sort) <(ls | sort)) >"$work/new"
  # Reproducible: the same inputs give the same bytes (no times, owners or order of the disk).
  tar -C "$work/all" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -cJf "tests/fuzz/grown/$name.tar.xz.tmp" -T "$work/new"
  mv "tests/fuzz/grown/$name.tar.xz.tmp" "tests/fuzz/grown/$name.tar.xz"
  printf '%-18s %6d inputs beyond %4d seeds, %8d bytes packed\n' "$name" "$(wc -l <"$work/new")" \
    "$(ls "$work/seeds" | wc -l)" "$(stat -c %s "tests/fuzz/grown/$name.tar.xz")"
  rm -rf "$work"
}
if [ "$save" -eq 1 ]; then
  for name in "${targets[@]}"; do save_target "$name"; done
  exit 0
fi

log_dir=$(mktemp -d)
# The targets that read a path write each input to a file of their own under $TMPDIR
# (tests/fuzz/fuzz_util.h). On a disk they wait on it (safetensors and megatron_idx got 2/3 of
# a core at /tmp on ext4); in memory (/dev/shm) they run on the CPU. The folder goes at the end.
scratch_parent=/dev/shm
[ -d "$scratch_parent" ] && [ -w "$scratch_parent" ] || scratch_parent=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$scratch_parent/ljfuzz-scratch.XXXXXX")
export TMPDIR=$scratch
trap 'rm -rf "$log_dir" "$scratch"' EXIT
touch "$log_dir/start"
if [ "$replay" -eq 1 ]; then
  echo "replaying the seed and grown corpora of ${#targets[@]} targets, $jobs at a time"
else
  echo "fuzzing ${#targets[@]} targets for ${seconds} s each, $jobs at a time; corpus in $root"
fi
running=0
for name in "${targets[@]}"; do
  run_target "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=0
printf '%-18s %12s %8s %8s %8s %8s %8s  %s\n' target executions cov ft corpus seconds cpu-s \
  findings
for name in "${targets[@]}"; do
  log=$log_dir/$name.log
  rc=$(cat "$log_dir/$name.rc" 2>/dev/null || echo 1)
  execs=$(sed -n "s/^stat::number_of_executed_units: *//p" "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$([ "$replay" -eq 1 ] && echo "$log_dir/corpus-$name" || echo "$root/$name")" -type f | wc -l)
  found=$(find "$root/findings/$name" -type f -newer "$log_dir/start" | wc -l)
  # libFuzzer's -timeout is wall time: on a starved host (a loaded machine, a niced run) a fast
  # input can pass it. A timeout counts only if its input is slow again when run alone.
  if [ "$rc" -ne 0 ] && [ "$found" -gt 0 ] &&
    [ -z "$(find "$root/findings/$name" -type f -newer "$log_dir/start" ! -name 'timeout-*')" ]; then
    slow=0
    while IFS= read -r t; do
      "$build/tests/fuzz/${name}_fuzz" -timeout=10 -rss_limit_mb=2048 "$t" >/dev/null 2>&1 || slow=1
    done < <(find "$root/findings/$name" -type f -newer "$log_dir/start" -name 'timeout-*')
    if [ "$slow" -eq 0 ]; then
      echo "$name: libFuzzer reported a timeout whose input runs within the limit alone (a starved" \
        "host, not a finding); the run stopped early"
      find "$root/findings/$name" -type f -newer "$log_dir/start" -name 'timeout-*' -delete
      rc=0 found=0
    fi
  fi
  what=none
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed=1
    what="$found (exit $rc): $(grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error' "$log" | cut -c1-120)"
  fi
  secs=$(cat "$log_dir/$name.sec" 2>/dev/null || echo '?')
  # The last line: /usr/bin/time puts "Command exited with non-zero status" before it.
  cpu=$(awk 'END { if (NF == 2) printf "%.0f", $1 + $2 }' "$log_dir/$name.cpu" 2>/dev/null || true)
  printf '%-18s %12s %8s %8s %8s %8s %8s  %s\n' "$name" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
    "$corpus" "$secs" "${cpu:-?}" "$what"
  if [ "$rc" -ne 0 ]; then
    echo "---- $name: last lines of the log ----"
    grep -v '^    #' "$log" | tail -25
    ls "$root/findings/$name"
  fi
done
exit "$failed"
