# One name, one meaning across commands (issue 31, point 4): the renamed flags, their old names
# (still taken, with a warning naming the new one, hidden from --help), the defaults plan shares
# with benchmark, and train's learning-rate warmup shown on every step line.
# Usage: bash flag_names_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

# help_default CMD FLAG: the default --help prints for FLAG ("small", "4", ...).
help_default() {
  "$LJ" "$1" --help | grep -E -- "^ +$2 " | awk '{print $2}' | sed 's/.*=//' 
}

echo "check: each new name is in --help, each old name is not"
while read -r cmd new old; do
  "$LJ" "$cmd" --help >h.txt
  grep -qE -- "^ +$new[ ,]" h.txt || fail "$cmd --help does not list $new"
  if grep -qE -- "(^| |,)$old([ ,=]|$)" h.txt; then fail "$cmd --help still lists $old: $(grep -- "$old" h.txt)"; fi
done <<'EOF'
benchmark --skip-steps --warmup-steps
benchmark --out --output
plan --np --gpus
plan --coefficients --model-file
calibrate --measure --device
calibrate --coefficients --model-file
doctor --nproc-per-node --gpus
eval --val-batches --max-batches
init --max-shard-size --max-shard-mb
EOF
pass "9 renames: new names listed, old names hidden"

echo "check: an old name still works and warns with the new one"
# old_name_warns NEW CMD...: runs CMD, which must succeed and say "<old> is now NEW".
old_name_warns() {
  local new=$1
  shift
  "$@" >o.out 2>o.err || { cat o.err >&2; fail "$* failed"; }
  grep -q -- "is now $new" o.err || fail "$*: no warning naming $new: $(head -3 o.err)"
}
old_name_warns --np "$LJ" plan --model tiny --device cpu --gpus 2 --seq-len 32
grep -q "2 processes, ZeRO-0" o.out || fail "plan --gpus 2 did not plan 2 ranks: $(head -1 o.out)"
old_name_warns --nproc-per-node "$LJ" doctor --gpus 16
grep -q 'hpn0' o.out || fail "doctor --gpus 16 gave no hpn0 advice"
old_name_warns --skip-steps "$LJ" benchmark --model tiny --steps 2 --warmup-steps 1 --seq-len 32 --batch-size 1 --threads 2 --output old.jsonl
grep -q 'is now --out' o.err || fail "benchmark --output did not warn"
[ "$(wc -l <old.jsonl)" -eq 1 ] || fail "benchmark --output old.jsonl did not append one record"
grep -q '"warmup_steps":1' old.jsonl || fail "benchmark --warmup-steps 1 did not skip 1 step: $(head -c 300 old.jsonl)"
old_name_warns --max-shard-size "$LJ" init --model tiny --out sharded --max-shard-mb 1
pass "plan --gpus, doctor --gpus, benchmark --warmup-steps/--output, init --max-shard-mb"

echo "check: init --max-shard-size reads HF's units (GB = 1e9, GiB = 2^30) and refuses others"
"$LJ" init --model tiny --out s100k --max-shard-size 100KB >/dev/null || fail "init --max-shard-size 100KB"
n=$(ls s100k/*.safetensors | wc -l)
[ "$n" -ge 2 ] || fail "0.11M params in f32 (about 440 KB) in shards of 100 KB: $n file(s)"
rc=0
"$LJ" init --model tiny --out bad --max-shard-size 5XB >b.out 2>b.err || rc=$?
[ "$rc" -ne 0 ] && grep -q -- '--max-shard-size' b.err && [ ! -e bad ] ||
  fail "--max-shard-size 5XB: rc $rc, $(cat b.err), folder left: $(ls -d bad 2>/dev/null)"
pass "100KB gives $n shards; 5XB refused naming the flag, nothing written"

echo "check: plan's defaults are benchmark's (model, micro-batch, sequence, device)"
for flag in --model --batch-size --seq-len; do
  b=$(help_default benchmark "$flag") p=$(help_default plan "$flag")
  [ -n "$b" ] && [ "$b" = "$p" ] || fail "$flag: benchmark's default '$b', plan's '$p'"
done
[ "$(help_default plan --device)" = auto ] && [ "$(help_default benchmark --device)" = auto ] ||
  fail "--device defaults: plan $(help_default plan --device), benchmark $(help_default benchmark --device)"
"$LJ" plan >p.out 2>p.err || { cat p.err >&2; fail "ljperf plan with no flags failed"; }
grep -q "ljperf plan: small .* micro-batch 4 x seq 256" p.out || fail "plan alone: $(head -1 p.out)"
pass "model $(help_default plan --model), micro-batch $(help_default plan --batch-size), seq $(help_default plan --seq-len), device auto"

echo "check: --device cpu means this host in plan as in benchmark (host is kept as a spelling)"
"$LJ" plan --model tiny --device cpu --seq-len 32 >c1.out || fail "plan --device cpu"
"$LJ" plan --model tiny --device host --seq-len 32 >c2.out || fail "plan --device host"
[ "$(head -1 c1.out)" = "$(head -1 c2.out)" ] || fail "plan --device cpu and host differ: $(head -1 c1.out) / $(head -1 c2.out)"
pass "plan --device cpu = host: $(head -1 c1.out | cut -c1-80)"

echo "check: train's default warmup is a tenth of --steps, and every step line shows the LR"
make_llmc_tokens tok.bin 4000 256
"$LJ" train --model tiny --data tok.bin --out run --steps 5 --batch-size 2 --seq-len 32 --threads 2 \
  --lr 1e-3 --min-lr 1e-4 >t.out 2>t.err || { cat t.err >&2; fail "train failed"; }
lrs=$(grep -oE 'lr: [0-9.e+-]+' t.err | cut -d' ' -f2 | tr '\n' ' ')
[ "$(wc -w <<<"$lrs")" -eq 5 ] || fail "5 steps, LR on $(wc -w <<<"$lrs") step lines: $(head -2 t.err)"
# 5 steps: warmup 0 (5/10), so step 1 runs at --lr and the cosine decay lowers it from there.
first=$(cut -d' ' -f1 <<<"$lrs") last=$(cut -d' ' -f5 <<<"$lrs")
perl -e 'exit !($ARGV[0] == 1e-3 && $ARGV[1] < $ARGV[0])' "$first" "$last" ||
  fail "LRs over 5 steps: $lrs (expected 1e-3 first, then decay)"
pass "train --steps 5: LRs $lrs"

e2e_finish
