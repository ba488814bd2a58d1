# What a user can get wrong, as a table: every bad input must exit non-zero (without a crash),
# print exactly one line starting "error:" (optionally followed by one "hint:" line, and nothing
# else on stderr), and leave nothing partial behind: a new --out folder or output file must not
# exist afterwards, an existing folder must be unchanged byte for byte.
# Usage: bash bad_inputs_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

# --- inputs -----------------------------------------------------------------------------------
make_llmc_tokens tok.bin 20000 256                # fits the tiny preset (vocab 256)
make_llmc_tokens big_ids.bin 20000 300            # ids up to 299: outside tiny's vocabulary
head -c 5000 tok.bin >truncated.bin               # header says 20000 tokens, 1988 present
perl -e 'print pack("l<256", 12345, 1, 100, (0) x 253), pack("S<*", 1 .. 100)' >bad_magic.bin
perl -e 'print pack("l<256", 20240520, 1, 10, (0) x 253), pack("S<*", 1 .. 10)' >few.bin
: >empty.bin
echo '{"hidden_size": 64,' >malformed.json
cat >gpt2.json <<'EOF'
{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 256, "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
EOF
cat >mixtral.json <<'EOF'
{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 256,
 "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_local_experts": 8, "num_experts_per_tok": 9}
EOF
cat >deepseek.json <<'EOF'
{"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 256,
 "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
EOF
echo '{"train_batch_size": 8,, }' >ds_malformed.json
echo '{"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}' \
  >ds_inconsistent.json
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}' >ds_offload.json
echo '{"activation_checkpointing": {"cpu_checkpointing": true}}' >ds_cpu_ckpt.json
small=(--batch-size 2 --seq-len 32 --threads 2)
# A finished run to damage, resume wrongly and export.
"$LJ" train --model tiny --data tok.bin --out "$TMP/run" --steps 2 "${small[@]}" >run.out 2>run.err ||
  { cat run.err >&2; fail "setup: a 2-step tiny run failed"; }
cp -a run corrupt
truncate -s 1000 "corrupt/$(cat corrupt/latest)/model.safetensors"
mkdir existing && echo "keep me" >existing/file.txt

# --- the table --------------------------------------------------------------------------------
rows=()
n_cases=0
# run_case NAME LEAVE TARGET MENTION -- COMMAND...: runs COMMAND and checks the contract.
#   LEAVE: absent (TARGET must not exist afterwards) or same (TARGET must be unchanged).
#   MENTION: a string the error line must contain ("" for none).
run_case() {
  local name=$1 leave=$2 target=$3 mention=$4 before="" rc=0 first n_lines n_err n_hint
  shift 5
  n_cases=$((n_cases + 1))
  [ "$leave" = same ] && before=$(snapshot "$target")
  "$@" >case.out 2>case.err || rc=$?
  first=$(grep -m1 '^error: ' case.err || head -1 case.err)
  rows+=("$(printf '%-44s %4s  %s' "$name" "$rc" "$first")")
  [ "$rc" -ne 0 ] || fail "$name: exit 0 (command: $*)"
  [ "$rc" -lt 128 ] || { cat case.err >&2; fail "$name: crashed with exit $rc (command: $*)"; }
  n_lines=$(grep -c '' case.err || true)
  n_err=$(grep -c '^error: ' case.err || true)
  n_hint=$(grep -c '^hint: ' case.err || true)
  if [ "$n_err" -ne 1 ]; then
    cat case.err >&2
    fail "$name: $n_err 'error:' lines on stderr, expected 1 (command: $*)"
  fi
  if [ "$n_lines" -ne $((1 + n_hint)) ] || [ "$n_hint" -gt 1 ] || ! head -1 case.err | grep -q '^error: ' ||
    { [ "$n_hint" -eq 1 ] && ! sed -n 2p case.err | grep -q '^hint: '; }; then
    known_bug "$name: stderr is not 'error:' [+ 'hint:'] alone; it is: $(tr '\n' '|' <case.err)"
  fi
  if [ -n "$mention" ] && ! grep '^error: ' case.err | grep -qF -- "$mention"; then
    fail "$name: the error does not mention '$mention': $(grep '^error: ' case.err)"
  fi
  case $leave in
    absent) [ ! -e "$target" ] || fail "$name: $target was left behind" ;;
    same)
      local after
      after=$(snapshot "$target")
      if [ "$before" != "$after" ]; then
        known_bug "$name: the failed command changed $target (a failed run must leave an existing" \
          "folder as it was): $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | tr '\n' ' ')"
      fi
      ;;
  esac
}

echo "check: each bad input exits non-zero with one error line (+ hint) and leaves nothing behind"
run_case "unknown preset" absent new "nope" -- \
  "$LJ" train --model nope --data tok.bin --out new "${small[@]}"
run_case "malformed config.json" absent new "malformed.json" -- \
  "$LJ" train --model malformed.json --data tok.bin --out new "${small[@]}"
run_case "unknown architecture in config.json" absent new "GPT2LMHeadModel" -- \
  "$LJ" train --model gpt2.json --data tok.bin --out new "${small[@]}"
run_case "Mixtral config.json with k > experts" absent new "num_experts_per_tok = 9 with 8 experts" -- \
  "$LJ" train --model mixtral.json --data tok.bin --out new "${small[@]}"
run_case "DeepSeek-V3 config.json (MLA)" absent new "DeepseekV3ForCausalLM" -- \
  "$LJ" train --model deepseek.json --data tok.bin --out new "${small[@]}"
run_case "malformed DeepSpeed JSON" absent R.jsonl "ds_malformed.json" -- \
  "$LJ" benchmark --model tiny --deepspeed ds_malformed.json --out R.jsonl
run_case "inconsistent DeepSpeed batch sizes" absent R.jsonl "train_batch_size" -- \
  "$LJ" benchmark --model tiny --deepspeed ds_inconsistent.json --out R.jsonl
run_case "unsupported DeepSpeed offload (nvme)" absent R.jsonl "offload_param" -- \
  "$LJ" benchmark --model tiny --deepspeed ds_offload.json --out R.jsonl
run_case "missing data file" absent new "missing.bin" -- \
  "$LJ" train --model tiny --data missing.bin --out new "${small[@]}"
run_case "empty data file" absent new "empty.bin" -- \
  "$LJ" train --model tiny --data empty.bin --out new "${small[@]}"
run_case "truncated llm.c shard" absent new "truncated.bin" -- \
  "$LJ" train --model tiny --data truncated.bin --out new "${small[@]}"
run_case "wrong magic, --data-format llmc" absent new "bad_magic.bin" -- \
  "$LJ" train --model tiny --data bad_magic.bin --data-format llmc --out new "${small[@]}"
# The written file's name, not its temporary's, and a hint (the rename of an atomic write).
mkdir -p in_the_way.bin && echo "keep me" >in_the_way.bin/file.txt
run_case "tokenize --out onto a folder" same in_the_way.bin "cannot put in_the_way.bin in place" -- \
  "$LJ" tokenize --tokenizer "$ROOT/tests/fixtures/tokenize/gpt2.tokenizer.json" \
  --input "$ROOT/README.md" --out in_the_way.bin
grep -q '^hint: .*folder of that name' case.err || fail "tokenize --out onto a folder: no hint: $(cat case.err)"
run_case "fewer tokens than one batch" absent new "few.bin" -- \
  "$LJ" train --model tiny --data few.bin --out new "${small[@]}"
run_case "token id above the vocabulary" absent new "299" -- \
  "$LJ" train --model tiny --data big_ids.bin --out new "${small[@]}"
run_case "--seq-len above max_position_embeddings" absent new "512" -- \
  "$LJ" train --model tiny --data tok.bin --out new --seq-len 512 --batch-size 2 --threads 2
run_case "negative --steps" absent new "--steps" -- \
  "$LJ" train --model tiny --data tok.bin --out new --steps -3 "${small[@]}"
run_case "--steps 0" absent new "--steps" -- \
  "$LJ" train --model tiny --data tok.bin --out new --steps 0 "${small[@]}"
run_case "--min-lr above --lr" absent new "--min-lr" -- \
  "$LJ" train --model tiny --data tok.bin --out new --lr 1e-4 --min-lr 1e-3 "${small[@]}"
run_case "unknown --decay" absent new "sqrt" -- \
  "$LJ" train --model tiny --data tok.bin --out new --decay sqrt "${small[@]}"
run_case "unknown --data-format" absent new "bogus" -- \
  "$LJ" train --model tiny --data tok.bin --data-format bogus --out new "${small[@]}"
run_case "unwritable --out (/proc)" absent /proc/ljperf-out "/proc/ljperf-out" -- \
  "$LJ" train --model tiny --data tok.bin --out /proc/ljperf-out --steps 2 "${small[@]}"
run_case "--out under a regular file" same tok.bin "tok.bin/out" -- \
  "$LJ" train --model tiny --data tok.bin --out tok.bin/out --steps 2 "${small[@]}"
run_case "corrupt checkpoint (truncated weights)" same corrupt "model.safetensors" -- \
  "$LJ" train --model tiny --data tok.bin --out corrupt --steps 4 "${small[@]}"
run_case "resume with other batch settings" same run "another run" -- \
  "$LJ" train --model tiny --data tok.bin --out run --steps 4 --batch-size 3 --seq-len 32 --threads 2
run_case "export into an existing folder" same existing "existing" -- \
  "$LJ" export run --hf existing
run_case "export of a folder without a checkpoint" absent hf "existing" -- \
  "$LJ" export existing --hf hf
run_case "export --dtype of no float type" absent hf "int8" -- \
  "$LJ" export run --hf hf --dtype int8
run_case "init into an existing folder" same existing "existing" -- \
  "$LJ" init --model tiny --out existing
run_case "eval with a missing model folder" absent no-such-model "no-such-model" -- \
  "$LJ" eval --model no-such-model --data tok.bin
run_case "eval --seq-len above max_position_embeddings" absent logits.safetensors "512" -- \
  "$LJ" eval --model "run/$(cat run/latest)" --data tok.bin --seq-len 512 --dump-logits logits.safetensors
run_case "eval --precision of no float type" absent logits.safetensors "i32" -- \
  "$LJ" eval --model "run/$(cat run/latest)" --data tok.bin --precision i32 --dump-logits logits.safetensors
run_case "plan --precision fp16 on a GPU (bf16 recipe only)" absent R.jsonl "bf16" -- \
  "$LJ" plan --model tiny --device h100 --precision fp16
run_case "unknown --precision" absent R.jsonl "fp8" -- \
  "$LJ" benchmark --model tiny --precision fp8 --out R.jsonl
run_case "--skip-steps not below --steps" absent R.jsonl "--skip-steps" -- \
  "$LJ" benchmark --model tiny --steps 4 --skip-steps 4 --out R.jsonl
run_case "unknown --recompute" absent R.jsonl "sometimes" -- \
  "$LJ" benchmark --model tiny --recompute sometimes --out R.jsonl
run_case "unknown --recompute-method" absent new "sideways" -- \
  "$LJ" train --model tiny --data tok.bin --out new --recompute full --recompute-method sideways "${small[@]}"
run_case "--recompute-layers 0" absent R.jsonl "--recompute-layers" -- \
  "$LJ" benchmark --model tiny --recompute full --recompute-layers 0 --out R.jsonl
run_case "--recompute-layers above the model's layers" absent new "3" -- \
  "$LJ" train --model tiny --data tok.bin --out new --recompute selective --recompute-method block \
  --recompute-layers 3 "${small[@]}"
run_case "DeepSpeed cpu_checkpointing" absent R.jsonl "cpu_checkpointing" -- \
  "$LJ" benchmark --model tiny --deepspeed ds_cpu_ckpt.json --out R.jsonl

# The corrupt checkpoint was not repaired or replaced behind the user's back.
[ "$(stat -c %s "corrupt/$(cat corrupt/latest)/model.safetensors")" -eq 1000 ] ||
  fail "the truncated model.safetensors was rewritten"

printf '\n%-44s %4s  %s\n' "case" "exit" "error line"
printf '%s\n' "${rows[@]}"
echo
pass "$n_cases bad inputs: non-zero exit, one error line, nothing partial left (KNOWN BUG lines aside)"
e2e_finish
