# `ljperf plan --np N` on the host prices the MPI collectives from this host's measured rates
# (src/probe/comm_rates.h): without them it says they are not priced and how to measure them;
# `mpirun -np 2 ljperf calibrate --comm` measures and caches them for 2 ranks; the plan then
# prices the step's collectives (the collective category of the step, comm_measured in --json),
# and a plan for another world size still has none. One process alone is refused. Expert
# parallelism: the token exchange priced from the measured all-to-all, and its refusals.
# Usage: bash dist_plan_comm_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
mpi_e2e_init
export XDG_CACHE_HOME="$TMP/cache" XDG_CONFIG_HOME="$TMP/config"

# The collective time of the plan's first candidate, and whether it was priced.
plan_comm() {
  perl -MJSON::PP -e '
    my $j = decode_json(do { local $/; <STDIN> });
    printf "%s %.9f\n", ($j->{comm_measured} ? "measured" : "unmeasured"),
      $j->{candidates}[0]{step_times}{collective} // 0;'
}

"$LJ" plan --model tiny --np 2 --recompute none >before.txt 2>&1 || fail "plan: $(cat before.txt)"
grep -q "collectives: not priced (no MPI rates measured for 2 ranks on this host; measure them: mpirun -np 2 ljperf calibrate --comm)" before.txt ||
  fail "no 'not priced' line: $(cat before.txt)"
"$LJ" plan --model tiny --np 2 --recompute none --json >before.json 2>/dev/null
read -r state seconds < <(plan_comm <before.json)
[ "$state" = unmeasured ] && [ "$seconds" = 0.000000000 ] || fail "before: $state $seconds"
pass "no rates: the collectives are not priced, and the plan says how to measure them"

rc=0
"$LJ" calibrate --comm >alone.txt 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "^hint: run it under the launcher" alone.txt || fail "one process: exit $rc, $(cat alone.txt)"
pass "calibrate --comm in one process: refused with a hint"

"${MPIRUN[@]}" -np 2 "$LJ" calibrate --comm >cal.txt 2>&1 || fail "calibrate --comm: $(cat cal.txt)"
grep -q "^MPI collectives over 2 ranks" cal.txt || fail "no measurement: $(cat cal.txt)"
[ -s "$XDG_CACHE_HOME/ljperf/comm_rates.json" ] || fail "no comm_rates.json in $XDG_CACHE_HOME"
pass "mpirun -np 2 ljperf calibrate --comm: $(grep -c ' bus ' cal.txt) samples cached"

"$LJ" plan --model tiny --np 2 --recompute none --json >after.json 2>/dev/null
read -r state seconds < <(plan_comm <after.json)
[ "$state" = measured ] || fail "after: $state"
perl -e 'exit($ARGV[0] > 0 ? 0 : 1)' "$seconds" || fail "after: collectives priced at $seconds s"
"$LJ" plan --model tiny --np 2 --recompute none >after.txt 2>&1
grep -q "ZeRO-0 collectives per step: .* exposed (MPI rates measured for 2 ranks" after.txt ||
  fail "no priced line: $(cat after.txt)"
pass "measured: the step's collectives cost ${seconds} s"

"$LJ" plan --model tiny --np 3 --recompute none >three.txt 2>&1
grep -q "not priced (no MPI rates measured for 3 ranks" three.txt || fail "np 3: $(cat three.txt)"
pass "another world size: not priced"

# Expert parallelism: the rank's token exchange priced from the all-to-all rates just measured,
# inside the collectives; a size the model or the world does not allow, a GPU plan and --measure
# are refused by name.
grep -q "^  all_to_all " cal.txt || fail "calibrate --comm measured no all_to_all: $(cat cal.txt)"
"$LJ" plan --model tiny-moe --np 2 --expert-parallel 2 --seq-len 32 --recompute none --json \
  >ep.json 2>ep.err || fail "plan --expert-parallel 2: $(cat ep.err)"
read -r ep exchange collective < <(perl -MJSON::PP -e '
  my $j = decode_json(do { local $/; <STDIN> }); my $c = $j->{candidates}[0];
  printf "%d %.9f %.9f\n", $j->{expert_parallel}, $c->{expert_exchange_seconds},
    $c->{step_times}{collective} // 0;' <ep.json)
[ "$ep" = 2 ] || fail "plan --expert-parallel 2: expert_parallel $ep in the JSON"
perl -e 'exit($ARGV[0] > 0 && $ARGV[0] <= $ARGV[1] ? 0 : 1)' "$exchange" "$collective" ||
  fail "the exchange priced at $exchange s of $collective s of collectives"
"$LJ" plan --model tiny-moe --np 2 --expert-parallel 2 --seq-len 32 --recompute none >ep.txt 2>&1
grep -q "^  token exchange per step: " ep.txt || fail "no exchange line: $(cat ep.txt)"
pass "plan --expert-parallel 2: the exchange costs ${exchange} s of ${collective} s of collectives"
ep_refused() {
  local want=$1
  shift
  local rc=0
  "$LJ" plan --model tiny-moe --seq-len 32 "$@" >refused.txt 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && grep -qF -- "$want" refused.txt && grep -q '^hint:' refused.txt ||
    fail "plan $*: exit $rc, $(cat refused.txt)"
  pass "plan $*: refused ($(grep -m1 '^error:' refused.txt))"
}
ep_refused "does not divide the 8 experts" --np 3 --expert-parallel 3
ep_refused "does not divide the world size 3" --np 3 --expert-parallel 2
ep_refused "GPU plans price no expert parallelism" --device h100 --np 2 --expert-parallel 2
ep_refused "expert parallelism needs its group's ranks" --np 2 --expert-parallel 2 --measure
