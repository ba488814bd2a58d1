# The README's "Using it" commands, read from README.md and run as written, scaled down where
# this host requires it (issue 31, point 5), so the README cannot drift from the tool. Every line
# of that block must be named below: run (with the flags that make it short, set in place of
# the README's values), or skipped with its reason. A new README line that is neither fails.
# Usage: bash readme_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

# Nothing a README command writes to the user's home: coefficients, caches.
export XDG_CONFIG_HOME=$TMP/config XDG_CACHE_HOME=$TMP/cache
mkdir -p "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME"

# The block's lines, without the trailing "# comment".
awk '/^## Using it/ {on = 1} on && /^```sh/ {inblock = 1; next} inblock && /^```/ {exit} inblock' \
  "$ROOT/README.md" | sed -E 's/[[:space:]]+#[[:space:]].*$//' >lines.txt
[ -s lines.txt ] || fail "no \`\`\`sh block under '## Using it' in README.md"

have_mpi=0
if command -v mpirun >/dev/null && [ "$("$LJ" doctor --json | perl -MJSON::PP -e \
  'print decode_json(join "", <STDIN>)->{facts}{mpi}{built_with_mpi} ? 1 : 0')" = 1 ]; then
  have_mpi=1
fi

# set_flags LINE FLAG VALUE ...: LINE with each FLAG's value set (replaced, or appended).
set_flags() {
  perl -e '
    my $l = shift;
    while (@ARGV) {
      my ($f, $v) = (shift, shift);
      if ($l =~ /(^|\s)\Q$f\E\s+\S+/) { $l =~ s/(^|\s)\Q$f\E\s+\S+/$1$f $v/ } else { $l .= " $f $v" }
    }
    print $l' "$@"
}

ran=0 skipped=0
# run_line LINE: runs it from this folder with the repository's files and this build.
run_line() {
  local cmd=$1 root_flags=""
  # Open MPI refuses root without --allow-run-as-root (the README says so) and more ranks than
  # cores without --oversubscribe.
  if mpirun --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
    root_flags="--oversubscribe"
    if [ "$(id -u)" = 0 ]; then root_flags+=" --allow-run-as-root"; fi
  fi
  cmd=${cmd//build\/ljperf/$LJ}
  cmd=${cmd//examples\//$ROOT/examples/}
  cmd=${cmd//mpirun -np/mpirun $root_flags -np}
  echo "  \$ $cmd" | cut -c1-160
  # As root, `ljperf ablation --np` adds --allow-run-as-root itself (README: ablation).
  # stdin closed: mpirun would read the README lines this loop reads.
  bash -c "$cmd" </dev/null >"out.$ran" 2>&1 || { tail -5 "out.$ran" >&2; fail "README line failed: $1"; }
  ran=$((ran + 1))
}
skip_line() {
  echo "  skip: $1 ($2)" | cut -c1-160
  skipped=$((skipped + 1))
}

short_bench=(--steps 2 --skip-steps 1 --threads 2)
while IFS= read -r line; do
  [ -n "$line" ] || continue
  # Before the cases: `mpirun -np 2 build/ljperf benchmark|train` would match theirs, and
  # without MPI there is nothing to run.
  if [[ $line == *mpirun*"build/ljperf"* && $have_mpi == 0 ]]; then
    skip_line "$line" "no MPI build or mpirun here"
    continue
  fi
  case "$line" in
    "build/ljperf --help" | "build/ljperf doctor")
      run_line "$line" ;;
    "build/ljperf benchmark --model deepspeed/llama3-8b")
      skip_line "$line" "tests/e2e/seed_commands_test.sh runs the seed's commands" ;;
    *"build/ljperf benchmark"*)
      run_line "$(set_flags "$line" "${short_bench[@]}")" ;;
    curl*)
      # No network in CI: the fixture of Llama 2's tokenizer (the same format, vocabulary
      # trimmed to 1756 ids) stands in for the download; a corpus from the tokenizer fixtures.
      cp "$ROOT/tests/fixtures/tokenize/llama2.tokenizer.json" tokenizer.json
      for _ in 1 2 3 4 5 6; do cat "$ROOT/tests/fixtures/tokenize/corpus.jsonl"; done | gzip >corpus.jsonl.gz
      skip_line "$line" "no network: tests/fixtures/tokenize/llama2.tokenizer.json instead" ;;
    *"build/ljperf tokenize"*)
      run_line "$(set_flags "$line" --val-fraction 0.1)" ;;
    *"build/ljperf train"*)
      run_line "$(set_flags "$line" --steps 2 --val-every 2 --val-batches 1 --threads 1 --seq-len 64)" ;;
    *"build/ljperf export"*)
      run_line "$line"
      [ -f runs/a-hf/tokenizer.json ] || fail "export wrote no tokenizer.json: $(ls runs/a-hf)" ;;
    *"build/ljperf eval"*)
      run_line "$(set_flags "$line" --val-batches 2 --seq-len 64 --threads 2)" ;;
    *"build/ljperf init --model llama3.2-1b"*)
      # 1.24B parameters are 5 GB of f32 files: the same command on the tiny preset.
      run_line "$(set_flags "$line" --model tiny)" ;;
    *"build/ljperf plan"*"--measure")
      run_line "$(set_flags "$line" --model tiny --seq-len 64 --rounds 2 --warmup-rounds 0 --threads 2)" ;;
    *"build/ljperf plan"* | *"build/ljperf calibrate"*)
      run_line "$(set_flags "$line" --threads 2)" ;;
    *"build/ljperf ablation"*)
      if [[ $line == *"--np"* && $have_mpi == 0 ]]; then
        skip_line "$line" "no MPI build or mpirun here"
      else
        run_line "$(set_flags "$line" --model tiny --rounds 1 --steps 2 --seq-len 64)"
      fi ;;
    *mpirun*"build/ljperf"*)
      if [ "$have_mpi" = 0 ]; then skip_line "$line" "no MPI build or mpirun here"; continue; fi
      if [[ $line == *train* ]]; then
        run_line "$(set_flags "$line" --steps 2 --seq-len 64)"
      else
        run_line "$(set_flags "$line" --steps 2 --skip-steps 1)"
      fi ;;
    *build-cuda/ljperf*)
      skip_line "$line" "needs a GPU: tools/gpu_check.sh runs the CUDA path" ;;
    "bench/speed/ab.sh "*)
      # The A/B harness, one round of the tiny preset. It times each run with /usr/bin/time
      # (Debian's `time`, which tools/setup.sh does not install).
      if [ -x /usr/bin/time ]; then
        run_line "$ROOT/$(set_flags "$line" --rounds 1 --steps 3 --model tiny --seq-len 64 --threads 2)"
        grep -q "^paired B/A over 1 rounds: tokens/s [0-9]" "out.$((ran - 1))" ||
          fail "ab.sh printed no paired ratio: $(tail -3 "out.$((ran - 1))")"
      else
        skip_line "$line" "no /usr/bin/time here (Debian package time)"
      fi ;;
    "bench/peers/compare.sh"*)
      skip_line "$line" "a benchmark of minutes that needs PyTorch" ;;
    *)
      fail "README line not covered by readme_test.sh: $line" ;;
  esac
done <lines.txt
[ "$ran" -ge 15 ] || fail "only $ran README lines ran"
pass "$ran README lines ran as written (scaled down), $skipped skipped with their reason"

e2e_finish
