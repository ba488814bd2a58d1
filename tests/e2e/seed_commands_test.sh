# The seed image's commands, each as its release note writes it (../shared/seeds): the 8B
# DeepSpeed benchmark, checkpoint optimization with the deepspeed/ ZeRO-3 recipe (one process
# and mpirun -np 2), stage3_prefetch_bucket_size left "auto", empty, null or absent, the doctor's
# NCCL_SOCKET_IFNAME and driver advice, and the ablation of every optimization.
# Usage: bash seed_commands_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

echo "check: ljperf benchmark --model deepspeed/llama3-8b (the seed's command, exactly)"
rc=0
timeout 300 "$LJ" benchmark --model deepspeed/llama3-8b >b8.out 2>b8.err || rc=$?
if [ "$rc" -eq 0 ]; then
  grep -q '^summary:' b8.out || fail "8B ran but printed no summary"
  pass "8B fits this host and ran"
else
  grep -q '^error: deepspeed/llama3-8b needs ' b8.err || { cat b8.err >&2; fail "8B refused without the memory line"; }
  hint=$(grep -m1 '^hint:' b8.err)
  # Actionable and true: the ZeRO-3 ranks that would fit, or a smaller model that fits here;
  # each is checked by the planner on the same host.
  if echo "$hint" | grep -q 'not implemented'; then fail "the hint says something is not implemented: $hint"; fi
  ranks=$(echo "$hint" | perl -ne 'print $1 if /ZeRO-3 over (\d+) or more hosts/')
  smaller=$(echo "$hint" | perl -ne 'print $1 if /--model (\S+) fits/')
  [ -n "$ranks$smaller" ] || fail "the hint names neither ZeRO-3 ranks nor a smaller model: $hint"
  if [ -n "$smaller" ]; then
    "$LJ" plan --device cpu --model "$smaller" --batch-size 4 --seq-len 256 --precision bf16 \
      --recompute none >small_plan.out 2>&1 ||
      { cat small_plan.out >&2; fail "the hint's --model $smaller does not fit by the planner"; }
    pass "the hint's --model $smaller fits by ljperf plan"
  fi
  if [ -n "$ranks" ]; then
    "$LJ" plan --device cpu --model llama3-8b --np "$ranks" --zero 3 --batch-size 4 --seq-len 256 \
      --precision bf16 --recompute none >z3_plan.out 2>&1 ||
      { cat z3_plan.out >&2; fail "the hint's ZeRO-3 over $ranks does not fit by the planner"; }
    pass "the hint's ZeRO-3 over $ranks hosts fits by ljperf plan"
  fi
  pass "refused with exit $rc: $(grep -m1 '^error:' b8.err | cut -c1-160)..."
  pass "$hint"
fi

echo "check: CHECKPOINT_OPTIMIZATION=true ljperf benchmark --model deepspeed/small"
run=(benchmark --model deepspeed/small --seq-len 128 --batch-size 4 --steps 3)
# A budget that the run without recompute does not fit, so the choice must recompute: the plan's
# predicted peaks of no recompute and of the cheapest choice, and a budget between them.
"$LJ" plan --device cpu --model small --batch-size 4 --seq-len 128 --precision bf16 --json >plan.json 2>plan.err ||
  { cat plan.err >&2; fail "plan of small failed"; }
budget=$(perl -MJSON::PP -e '
  my $j = decode_json(do { local $/; <STDIN> });
  my @c = @{$j->{candidates}};
  my ($none) = grep { $_->{policy} eq "none" } @c;
  my $min = (sort { $a <=> $b } map { $_->{peak_bytes} } @c)[0];
  die "no none candidate\n" unless $none;
  printf "%d", ($none->{peak_bytes} + $min) / 2;' <plan.json) || fail "cannot read the plan's candidates"
CHECKPOINT_OPTIMIZATION=true "$LJ" "${run[@]}" --threads 2 --memory-limit "$budget" --out ck.jsonl >ck.out 2>ck.err ||
  { cat ck.out ck.err >&2; fail "CHECKPOINT_OPTIMIZATION=true with deepspeed/small failed"; }
grep -q 'zero_optimization.stage = 3' ck.out || fail "the deepspeed/ recipe's stage 3 is not printed"
choice=$(grep -m1 '^recompute:' ck.out)
[ -n "$choice" ] && ! echo "$choice" | grep -q 'recompute: none' || { cat ck.out >&2; fail "checkpoint optimization kept no recompute within a budget it does not fit: $choice"; }
peak=$(json_get ck.jsonl 1 summary.peak_rss_bytes)
perl -e 'exit($ARGV[0] <= $ARGV[1] ? 0 : 1)' "$peak" "$budget" ||
  fail "measured peak $peak above the budget $budget"
pass "$choice; measured peak $peak <= budget $budget"
sed -n '/^DeepSpeed config /,/^compile:/p' ck.out >resolved.txt
# The run configuration, printed once with every value's origin, and the same in the record.
for want in "ckpt_opt = on  (CHECKPOINT_OPTIMIZATION=true)" "zero_stage = 3  (deepspeed/zero3_bf16: file)" \
  "precision = bf16  (deepspeed/zero3_bf16: file)" "seq_len = 128  (--seq-len)" \
  "recompute = $(sed 's/^recompute: //' <<<"$choice")  (chosen by checkpoint optimization)"; do
  grep -qF -- "$want" ck.out || { sed -n '/^run configuration:/,/^precision:/p' ck.out >&2; fail "run configuration lacks '$want'"; }
done
[ "$(json_get ck.jsonl 1 resolved.ckpt_opt.from)" = "CHECKPOINT_OPTIMIZATION=true" ] &&
  [ "$(json_get ck.jsonl 1 resolved.micro_batch.from)" = "--batch-size" ] ||
  fail "the record's resolved config: $(json_get ck.jsonl 1 resolved.ckpt_opt.from), $(json_get ck.jsonl 1 resolved.micro_batch.from)"
pass "the run configuration names each value's origin (console and record)"

if command -v mpirun >/dev/null 2>&1; then
  mpi_e2e_init
  echo "check: CHECKPOINT_OPTIMIZATION=true mpirun -np 2 ljperf benchmark --model deepspeed/small (ZeRO-3)"
  rc=0
  CHECKPOINT_OPTIMIZATION=true timeout 300 "${MPIRUN[@]}" -np 2 "$LJ" "${run[@]}" --threads 1 --out ck2.jsonl >ck2.out 2>ck2.err || rc=$?
  [ "$rc" -eq 0 ] || { cat ck2.out ck2.err >&2; fail "2 ranks at ZeRO-3 with checkpoint optimization exited $rc"; }
  [ "$(json_get ck2.jsonl 1 config.zero_stage)" = 3 ] || fail "not ZeRO-3"
  [ "$(json_get ck2.jsonl 1 config.world_size)" = 2 ] || fail "not 2 ranks"
  grep -q '^checkpoint optimization' ck2.out || { cat ck2.out >&2; fail "no checkpoint optimization line"; }
  pass "2 ranks, ZeRO-3: $(grep -m1 '^recompute:' ck2.out); predicted per rank $(json_get ck2.jsonl 1 summary.predicted_peak_rss_bytes_per_rank), measured $(json_get ck2.jsonl 1 summary.process_peak_rss_bytes_per_rank)"
fi

echo "check: stage3_prefetch_bucket_size \"auto\", empty, null and absent"
for form in auto empty null absent; do
  case "$form" in
    auto) v='"stage3_prefetch_bucket_size": "auto",' ;;
    empty) v='"stage3_prefetch_bucket_size": "",' ;;
    null) v='"stage3_prefetch_bucket_size": null,' ;;
    absent) v='' ;;
  esac
  cat >"ds_$form.json" <<JSON
{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 3, $v "overlap_comm": true}}
JSON
  "$LJ" benchmark --model tiny --steps 1 --seq-len 32 --deepspeed "ds_$form.json" >"p_$form.out" 2>"p_$form.err" ||
    { cat "p_$form.err" >&2; fail "stage3_prefetch_bucket_size $form: benchmark failed"; }
  line=$(grep -m1 'zero_optimization.stage3_prefetch_bucket_size' "p_$form.out")
  case "$form" in
    auto) echo "$line" | grep -q 'auto: int(0.9 hidden_size^2)' || fail "auto: $line" ;;
    empty) echo "$line" | grep -q '50000000.*empty in the file: DeepSpeed default' || fail "empty: $line" ;;
    null) echo "$line" | grep -q '50000000.*null in the file: DeepSpeed default' || fail "null: $line" ;;
    absent) echo "$line" | grep -q '50000000.*DeepSpeed default' || fail "absent: $line" ;;
  esac
  pass "$form: $(echo "$line" | tr -s ' ')"
done

echo "check: ljperf doctor's NCCL_SOCKET_IFNAME and driver advice"
for g in 1 2 4 8 16; do
  want=eth0; [ "$g" = 16 ] && want=hpn0
  NCCL_SOCKET_IFNAME= "$LJ" doctor --nproc-per-node "$g" >"doc$g.out" 2>&1 || true
  grep -q "NCCL_SOCKET_IFNAME=$want" "doc$g.out" || { grep -i nccl "doc$g.out" >&2; fail "--nproc-per-node $g: no NCCL_SOCKET_IFNAME=$want advice"; }
done
pass "eth0 for 1, 2, 4 and 8 GPUs per pod, hpn0 for 16"
grep -q 'CUDA 13.0 needs driver >= 580' doc1.out || fail "no CUDA 13.0 driver rule"
grep -q 'CUDA 12.8 needs driver >= 575' doc1.out || fail "no CUDA 12.8 driver rule"
pass "$(grep -m1 -o 'CUDA 13.0 needs driver >= 580, CUDA 12.8 needs driver >= 575' doc1.out)"

echo "check: ljperf ablation --model deepspeed/small (every row, +ckpt-opt included)"
ab=(ablation --model deepspeed/small --seq-len 64 --batch-size 2 --steps 2 --rounds 1 --threads 1)
"$LJ" "${ab[@]}" --out ab1 >ab1.out 2>ab1.err || { cat ab1.out ab1.err >&2; fail "ablation failed"; }
# Every row ran (+comm is n/a in one process), the +ckpt-opt row included.
rows_ran() {
  perl -MJSON::PP -e '
    my $j = decode_json(do { local $/; <STDIN> });
    my @ran;
    for my $r (@{$j->{rows}}) {
      next if $r->{kind} ne "ljperf";
      if (!$r->{available}) {
        die "row $r->{name} did not run: $r->{unavailable_reason}\n" unless $r->{name} eq "+comm" && $ARGV[0] == 1;
        next;
      }
      die "row $r->{name} has no runs\n" unless @{$r->{runs}};
      push @ran, $r->{name};
    }
    die "no +ckpt-opt row ran\n" unless grep { /ckpt-opt/ } @ran;
    print join(", ", @ran), "\n";' "$2" <"$1/results.json"
}
ran=$(rows_ran ab1 1) || { cat ab1/results.json >&2; fail "a row of the ablation did not run"; }
pass "1 process, rows that ran: $ran"
if [ -n "${MPIRUN[*]:-}" ]; then
  "$LJ" "${ab[@]}" --np 2 --out ab2 >ab2.out 2>ab2.err || { cat ab2.out ab2.err >&2; fail "ablation --np 2 failed"; }
  ran=$(rows_ran ab2 2) || { cat ab2/results.json >&2; fail "a row of ablation --np 2 did not run"; }
  pass "--np 2 (ZeRO-3), rows that ran: $ran"
fi
e2e_finish
