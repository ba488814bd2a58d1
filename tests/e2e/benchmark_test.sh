# `ljperf benchmark` as a user runs it: the default run and its summary, the results file,
# DeepSpeed JSON resolution, and a model too big for the host refused quickly with advice.
# Usage: bash benchmark_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

# --- (a) no arguments: the default benchmark, within 60 s on an idle host (scaled under load) --
echo "check: 'ljperf benchmark' with no arguments completes with a full summary"
factor=$(load_factor)
limit_s=$((60 * factor))
t0=$(now_ms)
rc=0
# A fresh cache: the first run measures the host's peak (the FMA probe) and MFU names it.
export XDG_CACHE_HOME="$TMP/cache"
"$LJ" benchmark >a.out 2>a.err || rc=$?
ms=$(($(now_ms) - t0))
[ "$rc" -eq 0 ] || { cat a.err >&2; fail "ljperf benchmark exited $rc"; }
echo "  default benchmark: $((ms / 1000)).$((ms % 1000 / 100)) s (limit ${limit_s} s: 60 s x load factor $factor)"
[ "$ms" -le $((limit_s * 1000)) ] || fail "default benchmark took ${ms} ms, limit ${limit_s} s"
for pattern in '^ *tokens/s +[0-9]+' '^ *TFLOP/s +[0-9.]+' \
  '^ *MFU +[0-9.]+% +\(of [0-9.]+ GFLOP/s fp32, measured; the higher of the probes before and after the steps\)' \
  '^ *step time +p50 [0-9.]+ [mun]?s +p90 [0-9.]+ [mun]?s' '^ *process peak RSS ' \
  '^ *step CPU time p50 .*tokens per CPU-second, MFU [0-9.]+% of the CPU time' \
  '^ *host load +others held [0-9.]+% of the cores. time \([0-9.]+% hypervisor steal\)'; do
  grep -Eq "$pattern" a.out || { cat a.out >&2; fail "summary has no line matching '$pattern'"; }
done
# The memory table: a header, one row per category, and the total.
for row in '^category +current +peak' '^weights ' '^grads ' '^optimizer ' '^activations ' '^total '; do
  grep -Eq "$row" a.out || { cat a.out >&2; fail "memory table has no row matching '$row'"; }
done
pass "summary: $(grep -E '^ *tokens/s' a.out | tr -s ' '); $(grep -E '^ *MFU' a.out | tr -s ' ')"
[ -s "$XDG_CACHE_HOME/ljperf/host_peak.json" ] || fail "the measured peak was not cached"
"$LJ" doctor >d.out 2>&1 || true
grep -Eq 'fp32 peak [0-9.]+ GFLOP/s fp32, measured' d.out || { cat d.out >&2; fail "doctor does not show the cached measured peak"; }
pass "MFU of the measured peak, cached per host; doctor shows it beside the nominal figure"
pass "$(grep -E '^ *step time' a.out | tr -s ' ')"
# Not a terminal here: one progress line per step on stderr, torchtitan's form.
steps_logged=$(grep -cE '^step: +[0-9]+ +loss: ' a.err || true)
[ "$steps_logged" -eq 12 ] || fail "expected 12 step lines on stderr (default --steps 12), got $steps_logged"
pass "12 torchtitan step lines on stderr"

# --- (b) --out appends exactly one JSON object per run -------------------------------------
echo "check: --out R.jsonl appends one valid JSON line per run"
for run in 1 2; do
  "$LJ" benchmark --model tiny --steps 4 --skip-steps 1 --seq-len 64 --threads 2 --out R.jsonl >b.out 2>b.err ||
    { cat b.err >&2; fail "benchmark --out run $run failed"; }
  n=$(json_count R.jsonl)
  [ "$n" -eq "$run" ] || fail "after run $run, R.jsonl has $n lines"
done
for key in config.model config.steps config.warmup_steps config.seq_len summary.tokens_per_s summary.tflops \
  summary.mfu summary.step_s_p50 summary.step_s_p90 summary.bytes_peak summary.flops_per_token \
  summary.bytes_peak_by_category.weights summary.mfu_cpu summary.host_other_share \
  summary.host_steal_share host.cores step_seconds losses; do
  for line in 1 2; do
    v=$(json_get R.jsonl $line "$key")
    if [ "$v" = MISSING ] || [ "$v" = null ]; then fail "R.jsonl line $line has no '$key'"; fi
  done
done
[ "$(json_get R.jsonl 2 config.model)" = tiny ] || fail "config.model is not tiny"
[ "$(json_get R.jsonl 2 config.steps)" = 4 ] || fail "config.steps is not 4"
n_steps=$(json_get R.jsonl 2 step_seconds | tr ',' '\n' | grep -c '[0-9]')
[ "$n_steps" -eq 4 ] || fail "step_seconds has $n_steps entries, expected 4"
pass "2 runs -> 2 JSON lines, each with config, summary (tokens_per_s, mfu, p50/p90, bytes_peak) and 4 step times"

# --- (c) DeepSpeed JSON: resolved values are printed ------------------------------------------
echo "check: --deepspeed examples/deepspeed/zero2.json prints the resolved values"
"$LJ" benchmark --model tiny --steps 2 --skip-steps 1 --seq-len 64 --threads 2 \
  --deepspeed "$ROOT/examples/deepspeed/zero2.json" >c1.out 2>c1.err || { cat c1.err >&2; fail "zero2.json run failed"; }
for pattern in 'zero_optimization.stage = 2 +\(file\)' 'train_micro_batch_size_per_gpu = 4 +\(auto' \
  'gradient_accumulation_steps = 1 +\(auto' 'reduce_bucket_size = 4096 +\(auto' 'scheduler.type = WarmupDecayLR' \
  'allgather_bucket_size = 200000000 +\(file\)'; do
  grep -Eq "$pattern" c1.out || { cat c1.out >&2; fail "zero2.json: no line matching '$pattern'"; }
done
pass "zero2.json: stage 2 (file), micro 4 (auto), accum 1, reduce_bucket_size 4096 = hidden^2 (auto), WarmupDecayLR"

echo "check: a DeepSpeed JSON of ours: accumulation inferred, clipping honoured, unknown key warned"
cat >ds.json <<'EOF'
{
  "train_batch_size": 8,
  "train_micro_batch_size_per_gpu": 2,
  "gradient_clipping": 0.5,
  "my_unknown_key": 3
}
EOF
"$LJ" benchmark --model tiny --steps 2 --skip-steps 1 --seq-len 64 --threads 2 --deepspeed "$TMP/ds.json" \
  --out C.jsonl >c2.out 2>c2.err || { cat c2.err >&2; fail "ds.json run failed"; }
grep -Eq 'gradient_accumulation_steps = 4 +\(inferred' c2.out || { cat c2.out >&2; fail "accumulation 4 not inferred"; }
grep -Eq 'gradient_clipping = 0.5 +\(file\)' c2.out || fail "gradient_clipping 0.5 not printed"
grep -Eq 'micro-batch 2 x seq 64 x accum 4' c2.out || fail "the run does not use micro-batch 2 x accum 4"
[ "$(json_get C.jsonl 1 config.grad_accum)" = 4 ] || fail "results file: grad_accum is not 4"
[ "$(json_get C.jsonl 1 config.grad_clip)" = 0.5 ] || fail "results file: grad_clip is not 0.5"
warn=$(grep -E '^warning: .*my_unknown_key' c2.err || true)
[ -n "$warn" ] || { cat c2.err >&2; fail "no warning naming my_unknown_key"; }
pass "accum 4 inferred from 8 / 2, clipping 0.5 used, warning: $warn"
# The warning names the file once, as every other message does.
n_names=$(grep -o "$TMP/ds.json" <<<"$warn" | wc -l)
if [ "$n_names" -ne 1 ]; then
  known_bug "the unknown-key warning names the DeepSpeed file $n_names times: '$warn'" \
    "(benchmark.cc prefixes r.ds->source to a warning that already starts with it)"
fi

# --- (c2) recompute: the same losses, less activation memory; the DeepSpeed block means full --
echo "check: --recompute selective / full give the losses of none, with a lower activation peak"
for policy in none selective full; do
  "$LJ" benchmark --model tiny --steps 3 --skip-steps 1 --seq-len 64 --threads 2 --recompute "$policy" \
    --out RC.jsonl >rc_$policy.out 2>rc_$policy.err || { cat rc_$policy.err >&2; fail "--recompute $policy failed"; }
  grep -Eq "^recompute: $policy" rc_$policy.out || { cat rc_$policy.out >&2; fail "no 'recompute: $policy' line"; }
done
for line in 2 3; do
  [ "$(json_get RC.jsonl $line losses)" = "$(json_get RC.jsonl 1 losses)" ] ||
    fail "losses differ: $(json_get RC.jsonl 1 losses) (none) vs $(json_get RC.jsonl $line losses) (line $line)"
done
act_none=$(json_get RC.jsonl 1 summary.bytes_peak_by_category.activations)
act_sel=$(json_get RC.jsonl 2 summary.bytes_peak_by_category.activations)
act_full=$(json_get RC.jsonl 3 summary.bytes_peak_by_category.activations)
[ "$act_full" -lt "$act_sel" ] && [ "$act_sel" -lt "$act_none" ] ||
  fail "activation peaks not falling: none $act_none, selective $act_sel, full $act_full"
[ "$(json_get RC.jsonl 3 config.recompute_policy)" = full ] || fail "results file: recompute_policy is not full"
pass "equal losses; activation peak bytes none $act_none > selective $act_sel > full $act_full"
echo '{"activation_checkpointing": {"partition_activations": true}}' >ds_ac.json
"$LJ" benchmark --model tiny --steps 2 --skip-steps 1 --seq-len 64 --threads 2 --deepspeed ds_ac.json \
  >ac.out 2>ac.err || { cat ac.err >&2; fail "activation_checkpointing run failed"; }
grep -Eq 'recompute = full +\(activation_checkpointing\)' ac.out || { cat ac.out >&2; fail "block did not mean full"; }
grep -Eq '^recompute: full, every layer \(uniform\)' ac.out || fail "the run does not recompute every layer"
pass "activation_checkpointing block -> $(grep -E '^recompute:' ac.out)"

# --- (d) a model far too big: refused in seconds, with advice, without allocating ------------
echo "check: --model deepspeed/llama3-8b is refused quickly with the memory it needs and a hint"
time_cmd=()
if [ -x /usr/bin/time ]; then time_cmd=(/usr/bin/time -f '%M' -o rss_kb.txt); fi
t0=$(now_ms)
rc=0
"${time_cmd[@]}" "$LJ" benchmark --model deepspeed/llama3-8b >d.out 2>d.err || rc=$?
ms=$(($(now_ms) - t0))
[ "$rc" -ne 0 ] || fail "deepspeed/llama3-8b ran on a host that cannot hold it (exit 0)"
[ "$rc" -lt 128 ] || fail "deepspeed/llama3-8b crashed (exit $rc)"
[ "$ms" -lt 10000 ] || fail "refusing deepspeed/llama3-8b took $ms ms (limit 10 s)"
[ "$(grep -c '^error: ' d.err)" -eq 1 ] || { cat d.err >&2; fail "expected exactly one 'error:' line"; }
[ "$(grep -c '^hint: ' d.err)" -eq 1 ] || { cat d.err >&2; fail "expected exactly one 'hint:' line"; }
err=$(grep '^error: ' d.err)
hint=$(grep '^hint: ' d.err)
grep -Eq 'needs [0-9.]+ [KMGT]iB.* [0-9.]+ [KMGT]iB available' <<<"$err" || fail "error line lacks needed vs available: $err"
fits=$(grep -Eo -- '--model [^ ]+ fits' <<<"$hint" | head -1 | cut -d' ' -f2)
[ -n "$fits" ] || fail "hint names no model that fits: $hint"
pass "exit $rc in $ms ms; $err"
pass "$hint"
if [ -s rss_kb.txt ]; then
  rss_kb=$(tail -1 rss_kb.txt)
  [ "$rss_kb" -lt 1048576 ] || fail "max RSS while refusing was $rss_kb KiB (limit 1 GiB)"
  pass "max RSS while refusing: $((rss_kb / 1024)) MiB"
else
  note "/usr/bin/time not found: max RSS not checked"
fi
# The advice holds: the model the hint names passes the memory check and trains a step.
"$LJ" benchmark --model "$fits" --steps 1 --skip-steps 0 --threads 2 >e.out 2>e.err ||
  { cat e.err >&2; fail "the hint's model '$fits' does not run"; }
pass "the hint's '--model $fits' runs"

# --- (f) short runs: the default warmup (2) is lowered to leave one measured step ---------------
echo "check: --steps 2 and --steps 1 run without --skip-steps (the default warmup is lowered)"
"$LJ" benchmark --model tiny --steps 2 --seq-len 64 --threads 2 >f2.out 2>f2.err ||
  { cat f2.err >&2; fail "benchmark --steps 2 (default warmup) failed"; }
grep -Fq 'warmup: 1 step (lowered from 2 for --steps 2)' f2.out ||
  { cat f2.out >&2; fail "--steps 2 does not say the warmup was lowered"; }
grep -Eq '^summary: 1 measured steps' f2.out || { cat f2.out >&2; fail "--steps 2 did not measure 1 step"; }
pass "--steps 2: $(grep -F 'warmup:' f2.out)"
"$LJ" benchmark --model tiny --steps 1 --seq-len 64 --threads 2 >f1.out 2>f1.err ||
  { cat f1.err >&2; fail "benchmark --steps 1 (default warmup) failed"; }
grep -Fq 'warmup: 0 steps (lowered from 2 for --steps 1)' f1.out ||
  { cat f1.out >&2; fail "--steps 1 does not say the warmup was lowered to 0"; }
grep -Eq '^summary: 1 measured steps' f1.out || { cat f1.out >&2; fail "--steps 1 did not measure 1 step"; }
pass "--steps 1: $(grep -F 'warmup:' f1.out)"
# An explicit --skip-steps that leaves nothing to measure is still an error.
rc=0
"$LJ" benchmark --model tiny --steps 2 --skip-steps 2 --seq-len 64 --threads 2 >f3.out 2>f3.err || rc=$?
[ "$rc" -ne 0 ] || fail "--steps 2 --skip-steps 2 was accepted"
grep -Fq -- '--skip-steps must be in [0, --steps)' f3.err || { cat f3.err >&2; fail "no --skip-steps error"; }
pass "--steps 2 --skip-steps 2: refused (exit $rc)"

# --- bf16 mixed precision on the CPU (passes/autocast): runs, says so, and records it --------
echo "check: --precision bf16 trains on the CPU in mixed precision"
"$LJ" benchmark --model tiny --steps 2 --skip-steps 1 --seq-len 64 --threads 2 --precision bf16 \
  --out bf16.jsonl >h.out 2>h.err || { cat h.err >&2; fail "benchmark --precision bf16 failed"; }
grep -Eq '^precision: bf16 mixed' h.out || { cat h.out >&2; fail "no 'precision: bf16 mixed' line"; }
grep -Fq '"precision":"bf16"' bf16.jsonl || { cat bf16.jsonl >&2; fail "results do not record bf16"; }
pass "$(grep -E '^precision:' h.out)"

e2e_finish
