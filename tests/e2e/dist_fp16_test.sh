# fp16 with loss scaling under `mpirun -np 2 ljperf train`, as a user runs it (DeepSpeed's `fp16`
# block): a forced overflow (initial scale 2^22) is skipped by every rank, the scale is lowered
# after the hysteresis exactly as in one process with --grad-accum 2 (the same global batches),
# and the run ends with the same losses, overflow flags and weights, at ZeRO 0 and ZeRO 3.
# A 2-rank fp16 run resumed from its checkpoint (the scaler's state is in the manifest's trainer
# state) ends bitwise equal to an uninterrupted one.
# Skips (exit 0, "SKIP: ...") without mpirun or an MPI build (lib.sh mpi_e2e_init).
# Usage: bash dist_fp16_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

mpi_e2e_init
mpi=("${MPIRUN[@]}" -np 2)

make_llmc_tokens tok.bin 20000 256
cat >ds16.json <<'JSON'
{"train_micro_batch_size_per_gpu": 2,
 "fp16": {"enabled": true, "initial_scale_power": 22, "loss_scale_window": 4, "hysteresis": 2}}
JSON
base=(train --model tiny --data tok.bin --seq-len 32 --threads 1 --deepspeed ds16.json --steps 16
  --decay constant --warmup-steps 0 --log-every 1 --comm-timeout 30)

# The (step, loss, overflow, loss_scale) of every line of metrics file $1, one per line.
trace() {
  perl -MJSON::PP -ne 'my $j = decode_json($_); next unless exists $j->{loss};
    printf "%d %.17g %s %s\n", $j->{step}, $j->{loss}, $j->{overflow} ? "overflow" : "ok", $j->{loss_scale}' "$1"
}

echo "check: one process with --grad-accum 2 (the reference)"
"$LJ" "${base[@]}" --grad-accum 2 --out "$TMP/one" >one.out 2>one.err || { tail -5 one.err >&2; fail "reference failed"; }
trace one/metrics.jsonl >one.trace
n_over=$(grep -c overflow one.trace || true)
[ "$n_over" -ge 3 ] && [ "$n_over" -le 12 ] || { cat one.trace >&2; fail "$n_over of 16 steps overflowed: not a test of both"; }
pass "$n_over of 16 steps skipped for overflow ($(grep '^fp16:' one.out))"

for z in 0 3; do
  echo "check: 2 ranks at ZeRO $z skip the same steps, move the scale alike, end with the same weights"
  "${mpi[@]}" "$LJ" "${base[@]}" --zero "$z" --out "$TMP/z$z" >"z$z.out" 2>"z$z.err" || { tail -5 "z$z.err" >&2; fail "ZeRO $z failed"; }
  trace "z$z/metrics.jsonl" >"z$z.trace"
  # Observed: every loss bitwise equal (one micro-batch per rank sums in one process's order; the
  # unscale is by a power of two), so the trace is compared exactly.
  diff one.trace "z$z.trace" >&2 || fail "ZeRO $z: the steps, losses, overflow flags or scales differ from one process"
  grep -q "^fp16: $n_over steps skipped for overflow in total" "z$z.out" || fail "ZeRO $z: summary $(grep '^fp16:' "z$z.out")"
  grep -E '^step: +2 .*skipped: fp16 overflow' "z$z.err" >/dev/null || fail "ZeRO $z: no skipped line for step 2"
  if grep -q '^rank ' "z$z.out" "z$z.err"; then fail "ZeRO $z: a rank printed an error line"; fi
  cmp -s one/step-16/model.safetensors "z$z/step-16/model.safetensors" ||
    fail "ZeRO $z: step-16/model.safetensors differs from one process's"
  pass "ZeRO $z: 16 steps equal one process's (losses, $n_over overflows, scales), model.safetensors byte-equal"
done

echo "check: a 2-rank fp16 run resumed from its checkpoint ends bitwise equal to an uninterrupted one"
"${mpi[@]}" "$LJ" "${base[@]}" --zero 1 --checkpoint-every 8 --out "$TMP/whole" >w.out 2>w.err || { tail -5 w.err >&2; fail "uninterrupted run failed"; }
half=("${base[@]}")
[ "${half[11]}" = --steps ] || fail "base changed: --steps is not its 12th word"
half[12]=8
"${mpi[@]}" "$LJ" "${half[@]}" --zero 1 --checkpoint-every 8 --out "$TMP/parts" >p1.out 2>p1.err || { tail -5 p1.err >&2; fail "first half failed"; }
grep -q '"loss_scale"' parts/step-8/manifest.json || fail "step-8/manifest.json holds no loss scale state"
"${mpi[@]}" "$LJ" "${base[@]}" --zero 1 --checkpoint-every 8 --out "$TMP/parts" >p2.out 2>p2.err || { tail -5 p2.err >&2; fail "resume failed"; }
grep -q "resumed from step 8" p2.out || fail "the second half did not resume from step 8"
for f in whole/step-16/*.safetensors; do
  cmp -s "$f" "parts/step-16/${f##*/}" || fail "parts/step-16/${f##*/} differs from the uninterrupted run's"
done
diff <(trace whole/metrics.jsonl) <(trace parts/metrics.jsonl) >&2 || fail "the resumed run's steps differ"
[ "$(trace whole/metrics.jsonl | sed -n 8p | cut -d' ' -f4)" != 4194304 ] ||
  fail "the scale at step 8 is still the initial one: the resume would not test the scaler's state"
pass "resumed at step 8; steps 9-16 and step-16's model and optimizer shards equal the uninterrupted run's"
e2e_finish
