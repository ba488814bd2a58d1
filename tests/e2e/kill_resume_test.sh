# Crash safety of `ljperf train`: a run killed with SIGKILL at any moment (between steps or in the
# middle of a checkpoint write) and then rerun with the same command ends bitwise equal to a run
# that was never interrupted; SIGTERM stops cleanly with a checkpoint. Checkpoint writes are a
# large share of this run's time (a 0.6M-parameter model writes ~7 MB per checkpoint, every 5
# steps), so evenly spread kills hit both kinds of moment; targeted trials make sure of each.
# Usage: bash kill_resume_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
shopt -s nullglob

readonly kSteps=60 kEvery=5 kKeep=2
make_llama_config cfg.json 4096 64 2 4 2 128 128
make_llmc_tokens tok.bin 200000 4096
common=(train --model "$TMP/cfg.json" --data "$TMP/tok.bin" --steps "$kSteps" --checkpoint-every "$kEvery"
  --keep-last "$kKeep" --batch-size 4 --seq-len 32 --log-every 10)
# One thread: fastest on a busy 2-core host; the SIGTERM part below runs with two.
ARGS1=("${common[@]}" --threads 1)
ARGS2=("${common[@]}" --threads 2)

# check_finished DIR REF LABEL: a completed run in DIR equals the reference REF. Temporary
# files other than checkpoint folders (latest.tmp.<pid>, left by a kill while `latest` was being
# replaced) are counted in n_stray, and step folders beyond --keep-last (left by a kill between
# the last commit and the pruning of old checkpoints) in n_extra; deterministic checks of both
# follow the trials.
n_stray=0 n_extra=0
check_finished() {
  local dir=$1 ref=$2 label=$3 f steps
  [ "$(cat "$dir/latest")" = "step-$kSteps" ] || fail "$label: latest names '$(cat "$dir/latest")', not step-$kSteps"
  for f in model.safetensors optimizer.safetensors; do
    cmp -s "$dir/step-$kSteps/$f" "$ref/step-$kSteps/$f" || fail "$label: step-$kSteps/$f differs from the reference"
  done
  local tmps=("$dir"/step-*.tmp.*)
  [ ${#tmps[@]} -eq 0 ] || fail "$label: checkpoint temporaries left after the run: ${tmps[*]}"
  local stray=("$dir"/*.tmp.*)
  if [ ${#stray[@]} -ne 0 ]; then
    note "$label: temporary files left after the run: ${stray[*]##*/}"
    n_stray=$((n_stray + 1))
  fi
  steps=("$dir"/step-*)
  if [ ${#steps[@]} -gt $kKeep ] && [ -d "$dir/step-$((kSteps - kEvery))" ]; then
    note "$label: --keep-last $kKeep left ${#steps[@]} step folders: ${steps[*]##*/}"
    n_extra=$((n_extra + 1))
  else
    [ ${#steps[@]} -eq $kKeep ] || fail "$label: --keep-last $kKeep left ${#steps[@]} step folders: ${steps[*]##*/}"
  fi
}

# --- reference: one uninterrupted run -----------------------------------------------------------
echo "check: reference run ($kSteps steps, checkpoint every $kEvery, keep $kKeep)"
t0=$(now_ms)
"$LJ" "${ARGS1[@]}" --out "$TMP/ref" >ref.out 2>ref.err || { cat ref.err >&2; fail "reference run failed"; }
ref_ms=$(($(now_ms) - t0))
check_finished ref ref reference
pass "reference: $ref_ms ms, latest step-$kSteps, $kKeep step folders kept"

# --- trials: SIGKILL at a moment, then rerun to completion -------------------------------------
n_ckpt=0 n_step=0 n_done=0 trial=0
# run_trial HOW ARG: starts a run, kills it with SIGKILL (HOW: "delay" after ARG ms; "tmp" as
# soon as the second checkpoint's temporary appears; "latest" as soon as the first checkpoint is
# committed), records what the kill hit, reruns to completion and compares with the reference.
run_trial() {
  local how=$1 arg=${2:--} out="$TMP/t$trial" pid rc=0 hit tmps latest
  "$LJ" "${ARGS1[@]}" --out "$out" >"t$trial.out" 2>"t$trial.err" &
  pid=$!
  E2E_BG_PID=$pid
  case $how in
    delay) sleep "$((arg / 1000)).$(printf %03d $((arg % 1000)))" ;;
    tmp)
      # The second checkpoint's write, so that the rerun has one to resume from.
      while [ ! -e "$out/latest" ] && kill -0 "$pid" 2>/dev/null; do :; done
      tmps=()
      while [ ${#tmps[@]} -eq 0 ] && kill -0 "$pid" 2>/dev/null; do tmps=("$out"/step-*.tmp.*); done
      ;;
    latest) while [ ! -e "$out/latest" ] && kill -0 "$pid" 2>/dev/null; do :; done ;;
  esac
  kill -9 "$pid" 2>/dev/null || true
  { wait "$pid"; } 2>/dev/null || rc=$?  # (no "Killed" job notice in the log)
  E2E_BG_PID=""
  tmps=("$out"/step-*.tmp.* "$out"/latest.tmp.*)
  latest=$(cat "$out/latest" 2>/dev/null || echo none)
  if [ "$rc" -eq 0 ]; then
    hit="run had finished"
    n_done=$((n_done + 1))
  elif [ "$rc" -ne 137 ]; then
    cat "t$trial.err" >&2
    fail "trial $trial: the run exited $rc before the kill"
  elif [ ${#tmps[@]} -gt 0 ]; then
    hit="checkpoint commit (${tmps[0]##*/})"
    n_ckpt=$((n_ckpt + 1))
  else
    hit="between checkpoints"
    n_step=$((n_step + 1))
  fi
  "$LJ" "${ARGS1[@]}" --out "$out" >"t$trial.out2" 2>"t$trial.err2" || { cat "t$trial.err2" >&2; fail "trial $trial: rerun failed"; }
  check_finished "$out" ref "trial $trial"
  # The rerun resumed from the committed checkpoint (a restart from scratch would end equal too).
  if [ "$latest" != none ]; then
    local from=${latest#step-}
    grep -q "done: step $kSteps ($((kSteps - from)) steps in this run, resumed from step $from)" "t$trial.out2" ||
      { cat "t$trial.out2" "t$trial.err2" >&2; fail "trial $trial: the rerun did not resume from $latest"; }
  fi
  printf '  trial %2d: kill (%-6s %4s ms) hit %-38s latest was %-8s -> resumed, equal to the reference\n' \
    "$trial" "$how" "$arg" "$hit," "$latest"
  rm -rf "$out"
  trial=$((trial + 1))
}

echo "check: 10 SIGKILLs spread over (0.1, 0.95) of the reference's $ref_ms ms, each rerun to the end"
for i in 0 1 2 3 4 5 6 7 8 9; do
  # Trial i kills inside the i-th tenth of (0.1, 0.95), at a random point of it.
  delay=$((ref_ms * (100000 + 85 * (i * 1000 + RANDOM % 1000)) / 1000000))
  run_trial delay "$delay"
done
# Targeted kills, so that both kinds happen whatever the timing did: one of each always, and
# more (up to 5) while a kind is still missing.
tries=0
while [ $tries -eq 0 ] || { [ $n_ckpt -eq 0 ] && [ $tries -lt 5 ]; }; do run_trial tmp; tries=$((tries + 1)); done
tries=0
while [ $tries -eq 0 ] || { [ $n_step -eq 0 ] && [ $tries -lt 5 ]; }; do run_trial latest; tries=$((tries + 1)); done
echo "  kills during a checkpoint write or commit: $n_ckpt; between checkpoints: $n_step;" \
  "after the run had finished: $n_done; runs that left a stray temporary file: $n_stray;" \
  "runs that left more than --keep-last step folders: $n_extra"
[ $n_ckpt -ge 1 ] || fail "no kill landed during a checkpoint write"
[ $n_step -ge 1 ] || fail "no kill landed between checkpoints"
pass "$trial trials, every resumed run bitwise equal to the reference"

# --- a kill after the final commit, before old checkpoints were pruned ---------------------------
echo "check: rerunning a finished run prunes what a kill left beyond --keep-last"
# Planted, so that it is checked every time: a run killed right after committing step-60 and
# pointing latest at it, before deleting step-50, leaves three step folders.
cp -a ref planted
cp -a planted/step-$((kSteps - kEvery)) planted/step-$((kSteps - 2 * kEvery))
sed -i "s/\"step\": $((kSteps - kEvery))/\"step\": $((kSteps - 2 * kEvery))/" \
  planted/step-$((kSteps - 2 * kEvery))/trainer_state.json
"$LJ" "${ARGS1[@]}" --out "$TMP/planted" >planted.out 2>planted.err || { cat planted.err >&2; fail "rerun failed"; }
grep -q "done: step $kSteps (0 steps in this run" planted.out || { cat planted.out >&2; fail "the rerun trained again"; }
n_extra_trials=$n_extra
n_extra=0
check_finished planted ref "rerun of a finished run"
if [ $n_extra -ne 0 ]; then
  known_bug "rerunning a finished run leaves $((kKeep + 1)) step folders where --keep-last is $kKeep (the" \
    "trials above hit this $n_extra_trials time(s)): a kill between the final commit and the pruning" \
    "leaves an extra checkpoint, and a rerun with nothing to train (trainer.cc saves, and so prunes," \
    "only when steps_run > 0) never removes it"
else
  pass "the extra step-$((kSteps - 2 * kEvery)) was pruned"
fi

# --- SIGTERM: a clean stop with a checkpoint, then resume --------------------------------------
echo "check: SIGTERM mid-run exits 0 with a checkpoint; the rerun ends equal to a 2-thread reference"
"$LJ" "${ARGS2[@]}" --out "$TMP/ref2" >ref2.out 2>ref2.err || { cat ref2.err >&2; fail "2-thread reference failed"; }
check_finished ref2 ref2 "2-thread reference"
"$LJ" "${ARGS2[@]}" --out "$TMP/term" >term.out 2>term.err &
pid=$!
E2E_BG_PID=$pid
while [ ! -e term/latest ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
E2E_BG_PID=""
[ "$rc" -eq 0 ] || { cat term.err >&2; fail "SIGTERM: exit $rc, expected 0"; }
stopped=$(grep -Eo 'stopped by signal at step [0-9]+' term.err || true)
[ -n "$stopped" ] || { cat term.err >&2; fail "SIGTERM: no 'stopped by signal' message"; }
step=${stopped##* }
[ "$step" -lt $kSteps ] || fail "SIGTERM arrived after the last step: the check proves nothing"
[ "$(cat term/latest)" = "step-$step" ] || fail "SIGTERM: latest names $(cat term/latest), not step-$step"
[ -f "term/step-$step/model.safetensors" ] || fail "SIGTERM: step-$step has no model.safetensors"
pass "SIGTERM: exit 0, $stopped, checkpoint step-$step committed"
# A storm of SIGTERMs from the first commit until the process is gone: every one lands on a
# running step, a checkpoint write or the exit. Before cli/stop_signals.h one that was handled
# on a thread inside oneDNN's f32 JIT GEMM wrote its signal frame over the heap (the kernel
# points the stack pointer at a heap buffer): "corrupted size vs. prev_size", exit 134, in 2 of
# 15 such runs; the unit test StopSignals.SignalStormDuringOneDnnGemmLeavesTheHeapIntact, 3 of 3.
for i in 1 2 3; do
  "$LJ" "${ARGS2[@]}" --out "$TMP/storm$i" >storm.out 2>storm.err &
  pid=$!
  E2E_BG_PID=$pid
  while [ ! -e "storm$i/latest" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
  n=0
  while kill -TERM "$pid" 2>/dev/null; do n=$((n + 1)); done
  rc=0
  wait "$pid" || rc=$?
  E2E_BG_PID=""
  [ "$rc" -eq 0 ] || { tail -3 storm.err >&2; fail "SIGTERM storm $i: exit $rc after $n signals, expected 0"; }
  grep -q 'stopped by signal at step' storm.err || { cat storm.err >&2; fail "SIGTERM storm $i: no 'stopped by signal'"; }
  echo "  storm $i: $n SIGTERMs, $(grep -Eo 'stopped by signal at step [0-9]+' storm.err), exit 0"
  rm -rf "storm$i"
done
pass "3 SIGTERM storms: each run stopped cleanly with a checkpoint, exit 0"
# What writers killed at other moments leave behind, planted so that the cleanup is checked
# every time: a half-written checkpoint folder and a half-replaced `latest`.
mkdir "term/step-$((step + 1)).tmp.999999"
head -c 1000 "term/step-$step/model.safetensors" >"term/step-$((step + 1)).tmp.999999/model.safetensors"
echo "step-$((step + 1))" >term/latest.tmp.999999
"$LJ" "${ARGS2[@]}" --out "$TMP/term" >term.out2 2>term.err2 || { cat term.err2 >&2; fail "rerun after SIGTERM failed"; }
grep -q "resumed from .*step-$step" term.err2 || { cat term.err2 >&2; fail "rerun did not say it resumed from step-$step"; }
n_stray_trials=$n_stray
n_stray=0
check_finished term ref2 "SIGTERM rerun"
pass "rerun resumed from step-$step (ignoring a planted half-written step-$((step + 1)).tmp.999999) and ended" \
  "bitwise equal to the 2-thread reference; the planted folder is gone"
if [ $n_stray -ne 0 ]; then
  known_bug "a stale latest.tmp.<pid> (what a kill while \`latest\` is being replaced leaves; the" \
    "trials above left $n_stray_trials such file(s)) survives the resumed run: checkpoint.cc's cleanup" \
    "removes stale step-*.tmp.* folders only, and atomic_file.cc's temporaries of dead writers are" \
    "never removed"
fi

e2e_finish
