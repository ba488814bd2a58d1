# The capability table (train/capabilities.h), as `ljperf doctor --json` publishes it, walked on
# the CPU: every entry marked supported runs (a two-step `ljperf benchmark` of tiny with that
# setting; ZeRO stages and several ranks under mpirun -np 2 when this host has it), every entry marked unsupported
# is refused with the table's words. The GPU's entries are checked host-side by
# tests/unit/capabilities_test.cc (no GPU here) and run by tools/gpu_check.sh.
# Usage: bash capabilities_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

"$LJ" doctor --json >doctor.json 2>doctor.err || { cat doctor.err >&2; fail "doctor --json failed"; }
perl -MJSON::PP -e '
  my $j = decode_json(do { local $/; <STDIN> });
  for my $c (@{$j->{facts}{capabilities}}) {
    next unless $c->{device} eq "cpu";
    print join("\t", $c->{feature}, $c->{value}, $c->{supported} ? 1 : 0, $c->{why}), "\n";
  }' <doctor.json >cpu.tsv
[ -s cpu.tsv ] || fail "doctor --json lists no CPU capabilities"
grep -q "Capabilities" <("$LJ" doctor) || fail "doctor's text has no Capabilities section"

mpi=0
if command -v mpirun >/dev/null 2>&1 &&
  perl -MJSON::PP -e 'exit(decode_json(do { local $/; <STDIN> })->{facts}{mpi}{built_with_mpi} ? 0 : 1)' <doctor.json; then
  mpi=1
  MPIRUN=(mpirun)
  if mpirun --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then MPIRUN+=(--allow-run-as-root --oversubscribe); fi
fi
"$LJ" init --model tiny --out hf >/dev/null || fail "init --model tiny failed"

base=(benchmark --steps 2 --seq-len 32 --batch-size 2 --threads 1)
n=0
while IFS=$'\t' read -r feature value supported why; do
  launch=()
  model=(--model tiny)
  case "$feature" in
    zero)
      flags=(--zero "$value")
      [ "$mpi" = 1 ] && launch=(env OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np 2) ;;
    precision) flags=(--precision "$value") ;;
    recompute) flags=(--recompute "$value") ;;
    compile) flags=(--compile) ;;
    profile) flags=(--profile) ;;
    ckpt-opt) flags=(--ckpt-opt) ;;
    hf-weights) model=(--model hf) flags=() ;;
    moe) model=(--model tiny-moe) flags=() ;;
    expert-parallel)
      # Needs 2 ranks: in a world of 1, size 2 is refused earlier (it does not divide the world).
      [ "$mpi" = 1 ] || { note "cpu expert-parallel $value: needs mpirun"; n=$((n + 1)); continue; }
      model=(--model tiny-moe) flags=(--expert-parallel 2)
      [ "$value" = on ] || flags+=(--precision "$value")
      launch=(env OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np 2) ;;
    ranks)
      flags=()
      if [ "$value" = several ]; then
        if [ "$mpi" = 0 ]; then
          # Ranks need mpirun and an MPI build; tools/setup.sh fails a skipped dist test where
          # both are present, so this line is only seen where they are not.
          echo "  not run: cpu ranks several (no mpirun or no MPI build here)"
          n=$((n + 1))
          continue
        fi
        launch=(env OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np 2)
      fi ;;
    *) fail "the table has a CPU feature this test does not know: $feature (add it here)" ;;
  esac
  rc=0
  timeout 300 "${launch[@]}" "$LJ" "${base[@]}" "${model[@]}" "${flags[@]}" </dev/null >run.out 2>run.err || rc=$?
  if [ "$supported" = 1 ]; then
    [ "$rc" -eq 0 ] || { tail -5 run.err >&2; fail "cpu $feature $value is marked supported but exited $rc"; }
    grep -q '^summary:' run.out || fail "cpu $feature $value: no summary"
    pass "cpu $feature $value runs (${launch[*]:+mpirun -np 2, }${model[*]} ${flags[*]})"
  else
    [ "$rc" -ne 0 ] || fail "cpu $feature $value is marked unsupported but ran"
    grep -qF "$why" run.err || { cat run.err >&2; fail "cpu $feature $value: refused without the table's words"; }
    pass "cpu $feature $value refused: $(grep -m1 'error:' run.err)"
  fi
  n=$((n + 1))
done <cpu.tsv
[ "$n" -ge 17 ] || fail "walked $n CPU entries, expected at least 17"
e2e_finish
