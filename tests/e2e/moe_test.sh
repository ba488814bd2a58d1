# Mixture of experts as a user runs it: tiny-moe (a Mixtral: top 2 of 8, the load-balancing loss
# on) benchmarks eager, compiled, with full recompute and in bf16, naming the active parameters
# that MFU counts; train -> export writes the Hub's per-expert tensors and evaluates to the
# checkpoint's loss; an inconsistent config.json (k > experts) is refused with one error line and
# a hint before anything is written, and so is an --expert-parallel size that cannot apply.
# Usage: bash moe_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

base=(benchmark --model tiny-moe --steps 3 --batch-size 2 --seq-len 32 --threads 2)
for flags in "" "--compile" "--recompute full" "--precision bf16" "--compile --precision bf16"; do
  # shellcheck disable=SC2086
  "$LJ" "${base[@]}" $flags >run.out 2>run.err || { tail -5 run.err >&2; fail "benchmark tiny-moe $flags failed"; }
  grep -q '^summary:' run.out || fail "benchmark tiny-moe $flags: no summary"
  grep -q 'N counts the active parameters: .* (the router and 2 of 8 experts per token)' run.out ||
    { cat run.out >&2; fail "benchmark tiny-moe $flags: the active parameters are not named"; }
  pass "benchmark tiny-moe ${flags:-(eager)}: $(grep -m1 'final loss' run.out | tr -s ' ')"
done

echo "check: train -> export writes per-expert tensors and evaluates to the checkpoint's loss"
make_llmc_tokens tok.bin 20000 256
"$LJ" train --model tiny-moe --data tok.bin --out out --steps 2 --batch-size 2 --seq-len 32 --threads 2 \
  >train.out 2>train.err || { cat train.err >&2; fail "train tiny-moe failed"; }
"$LJ" export out --hf hf >export.out 2>export.err || { cat export.err >&2; fail "export failed"; }
for t in model.layers.1.block_sparse_moe.experts.7.w3.weight model.layers.0.block_sparse_moe.gate.weight; do
  grep -aq "\"$t\"" hf/model.safetensors || fail "hf/model.safetensors has no $t"
done
if grep -aq 'experts.gate_up_proj' hf/model.safetensors; then fail "export wrote fused expert tensors"; fi
grep -q '"num_local_experts": 8' hf/config.json || fail "hf/config.json: $(cat hf/config.json)"
eval_args=(--data tok.bin --batch-size 2 --seq-len 32 --val-batches 4 --threads 2)
loss_ckpt=$("$LJ" eval --model "out/$(cat out/latest)" "${eval_args[@]}" 2>/dev/null | grep -E '^loss ')
loss_hf=$("$LJ" eval --model hf "${eval_args[@]}" 2>/dev/null | grep -E '^loss ')
[ -n "$loss_hf" ] && [ "$loss_ckpt" = "$loss_hf" ] || fail "exported: '$loss_hf', checkpoint: '$loss_ckpt'"
pass "per-expert export evaluates as the checkpoint: $loss_hf"

echo "check: k > experts is refused with one line and a hint, before anything is written"
mkdir bad
sed 's/"num_experts_per_tok": 2/"num_experts_per_tok": 9/' hf/config.json >bad/config.json
grep -q '"num_experts_per_tok": 9' bad/config.json || fail "could not make the bad config"
rc=0
"$LJ" train --model bad/config.json --data tok.bin --out badout --steps 1 --batch-size 2 --seq-len 32 \
  --threads 2 >bad.out 2>bad.err || rc=$?
[ "$rc" -ne 0 ] || fail "k = 9 of 8 experts was accepted"
[ "$(grep -c '^error:' bad.err)" = 1 ] || { cat bad.err >&2; fail "not one error line"; }
grep -q 'num_experts_per_tok = 9 with 8 experts' bad.err || { cat bad.err >&2; fail "the error does not say why"; }
grep -q '^hint:' bad.err || { cat bad.err >&2; fail "no hint"; }
[ ! -e badout ] || fail "the refused run wrote $(ls badout)"
pass "refused: $(grep '^error:' bad.err)"

echo "check: --expert-parallel that cannot apply is refused by name before anything is written"
# One process: a dense model, a size that does not divide the 8 experts, one that does not
# divide the world of 1 (dist_moe_test.sh checks the same under mpirun).
while IFS='|' read -r model n want; do
  rc=0
  "$LJ" train --model "$model" --data tok.bin --out epout --steps 1 --batch-size 2 --seq-len 32 \
    --threads 2 --expert-parallel "$n" >ep.out 2>ep.err || rc=$?
  [ "$rc" -ne 0 ] || fail "--model $model --expert-parallel $n was accepted"
  [ "$(grep -c '^error:' ep.err)" = 1 ] || { cat ep.err >&2; fail "$model, $n: not one error line"; }
  grep -qF -- "$want" ep.err || { cat ep.err >&2; fail "$model, $n: the error does not say '$want'"; }
  grep -q '^hint:' ep.err || { cat ep.err >&2; fail "$model, $n: no hint"; }
  [ ! -e epout ] || fail "the refused run wrote $(ls epout)"
  pass "refused: $(grep '^error:' ep.err)"
done <<'CASES'
tiny|2|model 'tiny' is dense
tiny-moe|3|--expert-parallel 3 does not divide the 8 experts of model 'tiny-moe'
tiny-moe|2|--expert-parallel 2 does not divide the world size 1
CASES

e2e_finish
