# `ljperf plan` and `ljperf calibrate` as a user runs them: output structure for llama3-8b on
# 8xH100 (ZeRO-3, micro-batch 2, seq 8192, selective) and llama3.1-70b, JSON output, bad inputs,
# and a calibrate --check / --results round on a benchmark record.
# Usage: bash plan_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
export XDG_CONFIG_HOME="$TMP/xdg"  # the embedded defaults, whatever this user calibrated

# Selective recompute does not fit 90% of an H100 here (78.6 GiB): the plan is printed whole,
# then one error line and exit 1 (a plan where nothing fits is not a success).
rc=0
"$LJ" plan --model llama3-8b --device h100 --np 8 --zero 3 --batch-size 2 --seq-len 8192 \
  --recompute selective >p8b.txt 2>p8b.err || rc=$?
[ "$rc" -eq 1 ] || fail "plan llama3-8b where nothing fits exited $rc, not 1: $(cat p8b.err)"
grep -q '^error: no recompute choice fits the budget of 71.7 GiB per rank' p8b.err ||
  fail "no error line for a plan where nothing fits: $(cat p8b.err)"
for want in "ljperf plan: llama3-8b (8.03B params, 32 layers) on 8 x NVIDIA H100 SXM 80GB, ZeRO-3" \
  "memory per rank" "  weights " "  optimizer " "  activations " "zero-3 gathered params" \
  "cuda context + workspace" "predicted peak" "ZeRO-3 collectives per step" "recompute choices:" \
  "  none " "  selective 32/32 layers" "planned in"; do
  grep -qF -- "$want" p8b.txt || fail "plan llama3-8b: no '$want' in: $(cat p8b.txt)"
done
# ZeRO-3 over 8 ranks: 2Ψ/8 of bf16 weights = 1.87 GiB, 12Ψ/8 of fp32 states = 11.22 GiB.
grep -qE '^  weights +1\.87 GiB$' p8b.txt || fail "weights per rank are not 2Ψ/8: $(grep weights p8b.txt)"
grep -qE '^  optimizer +11\.22 GiB$' p8b.txt || fail "optimizer per rank is not 12Ψ/8"
grep -q "  full " p8b.txt && fail "--recompute selective also listed full"
[ "$(grep -vc '^\(error\|hint\):' p8b.err)" -eq 0 ] || fail "plan wrote more than its error to stderr: $(cat p8b.err)"
pass "plan llama3-8b h100 x8 zero-3 selective: structure, ZeRO-3 states"

# 8 x H200 holds no choice at seq 8192 (full recompute needs 150.7 GiB a rank): 64 do.
"$LJ" plan --model llama3.1-70b --device h200 --np 64 --zero 3 --batch-size 1 --seq-len 8192 \
  >p70b.txt || fail "plan llama3.1-70b exited non-zero"
grep -qF "llama3.1-70b (70.55B params, 80 layers)" p70b.txt || fail "70b header: $(head -1 p70b.txt)"
for p in "  none " "  selective 80/80 layers" "  full 80/80 layers"; do
  grep -qF -- "$p" p70b.txt || fail "plan llama3.1-70b: no row '$p'"
done
note "llama3.1-70b: $(grep 'planned in' p70b.txt)"
pass "plan llama3.1-70b h200 x64: every policy"

"$LJ" plan --model tiny --device cpu --batch-size 2 --seq-len 64 --json >tiny.json ||
  fail "plan --json exited non-zero"
grep -q '"recommendation": {' tiny.json || fail "--json: no recommendation object"
grep -q '"candidates": \[' tiny.json || fail "--json: no candidates"
grep -q '"fits": true' tiny.json || fail "--json: nothing fits for tiny on the host"
pass "plan --json on the host"

# A budget below everything: the plan is printed, then one error line and exit 1.
rc=0
"$LJ" plan --model tiny --device cpu --batch-size 2 --seq-len 64 --memory-limit 1MiB >none.txt 2>none.err || rc=$?
[ "$rc" -eq 1 ] || fail "plan with a tiny budget exited $rc, not 1"
grep -q "nothing fits" none.txt || fail "no 'nothing fits' under a 1 MiB budget"
grep -q "^error: no recompute choice fits" none.err || fail "no error line: $(cat none.err)"
pass "plan under an impossible budget"

bad() {  # bad <what> <args...>: one error line, one hint line, exit non-zero
  local what=$1
  shift
  if "$LJ" "$@" >bad.out 2>bad.err; then fail "$what: exited 0"; fi
  [ "$(grep -c '^error: ' bad.err)" = 1 ] || fail "$what: not one error line: $(cat bad.err)"
  grep -q '^hint: ' bad.err || fail "$what: no hint: $(cat bad.err)"
  [ "$(wc -l <bad.err)" -le 2 ] || fail "$what: more than error+hint: $(cat bad.err)"
}
bad "unknown device" plan --model tiny --device tpu
bad "unknown model" plan --model llama9 --device h100
bad "bad memory limit" plan --model tiny --device cpu --memory-limit lots
bad "bad recompute" plan --model tiny --device cpu --recompute some
bad "no ranks" plan --model tiny --device cpu --np 0
bad "calibrate without a mode" calibrate
bad "calibrate missing results" calibrate --results nope.jsonl
pass "bad inputs: one error line and a hint"

# calibrate: --check on a real benchmark record, then --measure writes a readable coefficients file.
"$LJ" benchmark --model tiny --batch-size 2 --seq-len 32 --steps 2 --skip-steps 1 --threads 2 \
  --out runs.jsonl >bench.txt 2>&1 || fail "benchmark: $(tail -3 bench.txt)"
grep -q "predicted peak RSS" bench.txt || fail "benchmark does not print the predicted peak RSS"
grep -q '"peak_rss_bytes"' runs.jsonl || fail "record without peak_rss_bytes"
grep -q '"features"' runs.jsonl || fail "record without plan features"
"$LJ" calibrate --check runs.jsonl >check.txt || fail "calibrate --check"
grep -q "check over 1 records" check.txt || fail "calibrate --check output: $(cat check.txt)"
"$LJ" calibrate --measure --threads 2 --out "$TMP/model.json" >cal.txt || fail "calibrate --measure"
grep -q "GEMM (matmul kernel)" cal.txt || fail "calibrate --measure output: $(cat cal.txt)"
"$LJ" plan --model tiny --device cpu --seq-len 64 --coefficients "$TMP/model.json" >p.txt || fail "plan reads the calibrated file"
grep -qF "coefficients: $TMP/model.json" p.txt || fail "plan did not say it read $TMP/model.json"
pass "benchmark record -> calibrate --check; calibrate --measure -> plan --coefficients"

e2e_finish
