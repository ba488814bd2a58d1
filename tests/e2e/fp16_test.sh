# fp16 mixed precision with DeepSpeed's dynamic loss scaling, as a user runs it: `--precision
# fp16` and the DeepSpeed `fp16` block train, say which GEMM path runs, skip and count overflowing
# steps (console, metrics.jsonl, the summary), halve the scale after the hysteresis, and a resumed
# fp16 run (the scaler's state is in the checkpoint) is bitwise equal to an uninterrupted one.
# Usage: bash fp16_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

make_llmc_tokens tok.bin 20000 256
small=(--model tiny --data tok.bin --batch-size 2 --seq-len 32 --threads 2)

echo "check: --precision fp16 trains with DeepSpeed's default loss scale and names its GEMM path"
"$LJ" train "${small[@]}" --precision fp16 --steps 3 --log-every 1 --out plain >p.out 2>p.err ||
  { cat p.err >&2; fail "train --precision fp16 failed"; }
grep -Eq '^precision: fp16 mixed .*dynamic loss scale 2\^16, window 1000, hysteresis 2, min 1; GEMMs: ' p.out ||
  fail "no fp16 precision line with DeepSpeed's defaults: $(grep precision p.out)"
grep -Eq '^fp16: [0-9]+ steps skipped for overflow in total; loss scale now [0-9]+' p.out ||
  fail "no fp16 summary line: $(tail -2 p.out)"
pass "$(grep -E '^precision:' p.out | cut -c1-120)..."

echo "check: a forced overflow (scale 2^30) skips steps, halves the scale after the hysteresis, continues"
cat >ds16.json <<'JSON'
{"train_micro_batch_size_per_gpu": 2,
 "fp16": {"enabled": true, "initial_scale_power": 30, "loss_scale_window": 1000, "hysteresis": 2}}
JSON
"$LJ" train "${small[@]}" --deepspeed ds16.json --steps 20 --log-every 1 --out ovf >o.out 2>o.err ||
  { cat o.err >&2; fail "fp16 train with a forced overflow failed"; }
grep -q 'fp16.initial_scale_power = 30  (file)' o.out || fail "the DeepSpeed fp16 block is not shown as read: $(grep fp16 o.out)"
# Step 1 overflows at 2^30 and the hysteresis (2) keeps the scale; step 2 halves it.
grep -Eq '^step: +1 .*\(skipped: fp16 overflow at loss scale 1.07374e\+09, next 1.07374e\+09\)' o.err ||
  fail "step 1: $(grep -E '^step: +1 ' o.err)"
grep -Eq '^step: +2 .*\(skipped: fp16 overflow at loss scale 1.07374e\+09, next 5.36871e\+08\)' o.err ||
  fail "step 2: $(grep -E '^step: +2 ' o.err)"
json_count ovf/metrics.jsonl >/dev/null  # every line is JSON
n_over=$(grep -c '"overflow":true' ovf/metrics.jsonl || true)
[ "$n_over" -ge 2 ] && [ "$n_over" -lt 20 ] || fail "$n_over overflowing steps of 20 in metrics.jsonl"
last_ok=$(grep '"overflow":false' ovf/metrics.jsonl | tail -1)
[ -n "$last_ok" ] || fail "no step fitted after the scale came down"
grep -Eq "^fp16: $n_over steps skipped for overflow in total" o.out || fail "summary: $(grep '^fp16:' o.out), metrics: $n_over"
grep -q "\"skipped\":false" ovf/metrics.jsonl || fail "no step updated"
pass "$n_over of 20 steps skipped for overflow, then training went on ($(grep '^fp16:' o.out))"

echo "check: a resumed fp16 run (scaler state in the checkpoint) is bitwise equal to an uninterrupted one"
# From 2^19 with a window of 3: a few overflows, training, the scale doubling and overflowing
# again, so the resumed run must restore the scale, the hysteresis and the overflow history.
cat >ds16r.json <<'JSON'
{"train_micro_batch_size_per_gpu": 2,
 "fp16": {"enabled": true, "initial_scale_power": 19, "loss_scale_window": 3, "hysteresis": 2}}
JSON
r16=("${small[@]}" --deepspeed ds16r.json --decay constant --warmup-steps 0 --checkpoint-every 6 --log-every 1)
"$LJ" train "${r16[@]}" --steps 12 --out rA >rA.out 2>rA.err || { cat rA.err >&2; fail "fp16 12-step run failed"; }
"$LJ" train "${r16[@]}" --steps 6 --out rB >rB.out 2>rB.err || { cat rB.err >&2; fail "fp16 6-step run failed"; }
"$LJ" train "${r16[@]}" --steps 12 --out rB >rB2.out 2>rB2.err || { cat rB2.err >&2; fail "fp16 resume failed"; }
grep -q '"loss_scale"' rB/step-6/trainer_state.json || fail "step-6/trainer_state.json holds no loss_scale"
for f in model.safetensors optimizer.safetensors; do
  cmp -s rA/step-12/$f rB/step-12/$f || fail "fp16: step-12/$f of the resumed run differs"
done
n_ok=$(grep -c '"overflow":false' rA/metrics.jsonl || true)
n_ov=$(grep -c '"overflow":true' rA/metrics.jsonl || true)
[ "$n_ok" -ge 3 ] && [ "$n_ov" -ge 1 ] || fail "the 12-step run had $n_ok updates and $n_ov overflows: not a test of both"
diff <(grep -A6 loss_scale rA/step-12/trainer_state.json) <(grep -A6 loss_scale rB/step-12/trainer_state.json) >/dev/null ||
  fail "the loss scaler's state differs after the resume"
pass "6 + 6 steps equal 12 steps bit for bit, scaler state included ($(grep '^fp16:' rB2.out))"

echo "check: benchmark --precision fp16 runs"
"$LJ" benchmark --model tiny --steps 2 --skip-steps 1 --seq-len 64 --threads 2 --precision fp16 \
  --out b.jsonl >b.out 2>b.err || { cat b.err >&2; fail "benchmark --precision fp16 failed"; }
grep -Eq '^precision: fp16 mixed' b.out || fail "benchmark prints no fp16 precision line"
grep -Fq '"precision":"f16"' b.jsonl || fail "results do not record f16: $(cat b.jsonl)"
pass "$(grep -E '^precision:' b.out | cut -c1-100)..."

e2e_finish
