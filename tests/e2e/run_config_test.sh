# One resolver behind every command (issue 31): plan and eval resolve the settings they share
# with benchmark through cli/run_flags.h resolve_run, so the same flags, environment and
# DeepSpeed JSON give the same "run configuration:" lines (value and origin) in each.
# Usage: bash run_config_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

# config_lines FILE KEYS...: the lines of FILE's "run configuration:" block for KEYS, in the
# order given; fails when the block or a key is missing (two empty blocks must not agree).
config_lines() {
  local file=$1
  shift
  sed -n '/^run configuration:/,/^[^ ]/p' "$file" >block.txt
  [ -s block.txt ] || fail "$file has no run configuration block: $(head -3 "$file")"
  local key
  for key in "$@"; do
    grep -E "^  $key = " block.txt || fail "$file: no $key line in $(cat block.txt)"
  done
}

# same WHAT A B KEYS...: the KEYS lines of outputs A and B are identical.
same() {
  local what=$1 a=$2 b=$3
  shift 3
  config_lines "$a" "$@" >a.lines
  config_lines "$b" "$@" >b.lines
  diff a.lines b.lines >d.txt || fail "$what: $a and $b resolve differently:
$(cat d.txt)"
}

# value FILE KEY: the value of KEY's line in FILE's run configuration ("bf16", "4", "on", ...).
value() { config_lines "$1" "$2" | sed -E "s/^  $2 = ([^ ]*).*/\1/"; }

# plan_uses FILE: plan's headline (what it priced) says what its run configuration says.
plan_uses() {
  local mb seq prec comp want
  mb=$(value "$1" micro_batch) seq=$(value "$1" seq_len) prec=$(value "$1" precision)
  comp=$(value "$1" compile)
  case $prec in f32) prec="f32" ;; bf16) prec="bf16 mixed" ;; f16) prec="fp16 mixed" ;; esac
  [ "$comp" = on ] && comp=compiled || comp=eager
  want="micro-batch $mb x seq $seq, $prec.*, $comp\$"
  grep -qE "^ljperf plan: .*$want" "$1" || fail "plan's headline does not say '$want': $(head -1 "$1")"
}

# Benchmark's shortest run; plan and eval take none of these flags.
run_only=(--steps 2 --skip-steps 1)
plan_keys=(model micro_batch seq_len world_size precision zero_stage compile device threads)

# plan_vs_benchmark WHAT [KEY...] -- ARGS...: `plan ARGS` and `benchmark ARGS` agree on
# plan_keys and the extra KEYs.
plan_vs_benchmark() {
  local what=$1
  shift
  local keys=("${plan_keys[@]}")
  while [ "$1" != "--" ]; do
    keys+=("$1")
    shift
  done
  shift
  "$LJ" plan "$@" >plan.out 2>plan.err || { cat plan.err >&2; fail "$what: plan $* failed"; }
  "$LJ" benchmark "$@" "${run_only[@]}" >bench.out 2>bench.err ||
    { cat bench.err >&2; fail "$what: benchmark $* failed"; }
  same "$what" plan.out bench.out "${keys[@]}"
  plan_uses plan.out
  pass "$what: $(config_lines plan.out precision zero_stage micro_batch | tr -s ' ' | tr '\n' ';')"
}

echo "check: plan and benchmark resolve the same flags the same way"
common=(--model tiny --seq-len 32 --device cpu --threads 2)
plan_vs_benchmark "defaults" -- "${common[@]}"
plan_vs_benchmark "flags" recompute -- "${common[@]}" --batch-size 2 --precision bf16 --zero 1 \
  --recompute selective --compile
LJ_COMPILE=1 plan_vs_benchmark "LJ_COMPILE=1" -- "${common[@]}"
grep -q "compile = on  (LJ_COMPILE=1)" plan.out || fail "plan under LJ_COMPILE=1: $(grep compile plan.out)"
cat >ds.json <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 2}, "activation_checkpointing": {"partition_activations": false}}
EOF
plan_vs_benchmark "DeepSpeed JSON" recompute deepspeed -- "${common[@]}" --deepspeed ds.json
grep -q "micro_batch = 2  (ds.json: file)" plan.out || fail "plan did not take ds.json's micro-batch"
# plan's --precision auto is benchmark's --precision left out: the JSON's bf16.
"$LJ" plan "${common[@]}" --deepspeed ds.json --precision auto >auto.out || fail "plan --precision auto"
same "plan --precision auto" auto.out bench.out precision
plan_vs_benchmark "flags over the JSON" recompute deepspeed -- "${common[@]}" --deepspeed ds.json \
  --batch-size 3 --precision f32 --zero 0
plan_vs_benchmark "deepspeed/ recipe" recipe -- --model deepspeed/tiny --seq-len 32 --device cpu \
  --threads 2
grep -q "^ljperf plan: .*bf16 mixed" plan.out || fail "plan --model deepspeed/tiny is not bf16: $(head -1 plan.out)"

echo "check: eval and benchmark resolve the same flags the same way"
"$LJ" init --model tiny --out hf >/dev/null || fail "init --model tiny"
make_llmc_tokens tok.bin 2000 256
eval_keys=(model micro_batch seq_len precision threads)
# eval_vs_benchmark WHAT ARGS...
eval_vs_benchmark() {
  local what=$1
  shift
  "$LJ" eval --model hf --data tok.bin --val-batches 1 "$@" >eval.out 2>eval.err ||
    { cat eval.err >&2; fail "$what: eval $* failed"; }
  "$LJ" benchmark --model hf --device cpu "$@" "${run_only[@]}" >bench.out 2>bench.err ||
    { cat bench.err >&2; fail "$what: benchmark $* failed"; }
  same "$what" eval.out bench.out "${eval_keys[@]}"
  # What eval ran with is what it printed.
  grep -qE "in 1 batches of $(value eval.out micro_batch) x $(value eval.out seq_len)\$" eval.out ||
    fail "$what: eval's result line does not match its configuration: $(tail -1 eval.out)"
  if [ "$(value eval.out precision)" = bf16 ]; then
    grep -q "^precision: bf16 mixed" eval.out || fail "$what: eval did not run in bf16"
  fi
  pass "$what: $(config_lines eval.out micro_batch seq_len precision | tr -s ' ' | tr '\n' ';')"
}
eval_vs_benchmark "defaults"
eval_vs_benchmark "flags" --batch-size 2 --seq-len 32 --precision bf16 --threads 2

echo "check: plan and eval refuse what benchmark refuses, naming the flag"
for cmd in plan eval benchmark; do
  extra=()
  [ "$cmd" = eval ] && extra=(--data tok.bin)
  rc=0
  "$LJ" "$cmd" --model hf "${extra[@]}" --seq-len 0 >bad.out 2>bad.err || rc=$?
  [ "$rc" -ne 0 ] && grep -q -- "--seq-len: must be an integer >= 1" bad.err ||
    fail "$cmd --seq-len 0: rc $rc, $(cat bad.err)"
  rc=0
  "$LJ" "$cmd" --model hf "${extra[@]}" --seq-len 512 >bad.out 2>bad.err || rc=$?
  [ "$rc" -ne 0 ] && grep -q -- "--seq-len 512 is above" bad.err ||
    fail "$cmd --seq-len 512 (above the model's 256): rc $rc, $(cat bad.err)"
done
pass "--seq-len 0 and 512 refused alike by plan, eval and benchmark"

echo "check: every resolved value is printed with its origin, and the record holds the same"
all_keys=(model micro_batch grad_accum seq_len world_size precision lr weight_decay betas eps
  grad_clip steps zero_stage compile ckpt_opt recompute device threads seed skip_steps)
"$LJ" benchmark "${common[@]}" --steps 2 --out rec.jsonl >bench.out 2>bench.err ||
  { cat bench.err >&2; fail "benchmark --out failed"; }
config_lines bench.out "${all_keys[@]}" >/dev/null
# Every line of the block is "  key = value  (origin)", the origin never empty.
if grep '^  ' block.txt | grep -vE '^  [a-z0-9_]+ = .+  \([^)]+\)$' >noorigin.txt; then
  fail "lines without an origin: $(cat noorigin.txt)"
fi
grep '^  ' block.txt | sort >printed.txt
perl -MJSON::PP -e 'my $r = decode_json(<STDIN>)->{resolved};
  print "  $_ = $r->{$_}{value}  ($r->{$_}{from})\n" for keys %$r' <rec.jsonl | sort >recorded.txt
diff printed.txt recorded.txt >d.txt || fail "the record's \"resolved\" is not what was printed:
$(cat d.txt)"
grep -q "^  skip_steps = 1  (default, lowered for --steps 2)" printed.txt ||
  fail "benchmark --steps 2: $(grep skip_steps printed.txt)"
pass "benchmark: ${#all_keys[@]} keys, each with its origin, printed and recorded alike"
# The optimizer's values from each origin: the DeepSpeed JSON (benchmark), the flags (train).
cat >opt.json <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 0.5,
 "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.02}}}
EOF
"$LJ" benchmark "${common[@]}" --steps 2 --deepspeed opt.json >ds.out 2>ds.err ||
  { cat ds.err >&2; fail "benchmark --deepspeed opt.json failed"; }
config_lines ds.out weight_decay grad_clip >ds.lines
grep -q "weight_decay = 0.02  (opt.json: file)" ds.lines &&
  grep -q "grad_clip = 0.5  (opt.json: file)" ds.lines ||
  fail "the DeepSpeed JSON's optimizer values: $(cat ds.lines)"
"$LJ" train "${common[@]}" --data tok.bin --steps 2 --out run1 --weight-decay 0.05 --grad-clip 0 \
  >train.out 2>train.err || { cat train.err >&2; fail "train --weight-decay 0.05 failed"; }
config_lines train.out weight_decay grad_clip steps warmup_steps >train.lines
grep -q "weight_decay = 0.05  (--weight-decay)" train.lines &&
  grep -q "grad_clip = off  (--grad-clip)" train.lines &&
  grep -q "steps = 2  (--steps)" train.lines || fail "train's flags: $(cat train.lines)"
pass "weight_decay and grad_clip from the DeepSpeed JSON (benchmark) and the flags (train)"

e2e_finish
