# Mixture of experts under mpirun: tiny-moe (a Mixtral: top 2 of 8, the load-balancing loss on)
# data parallel over 2 ranks at ZeRO 0, 1, 2 and 3 gives the losses of one process with
# --grad-accum 2 (the same global batches), and selective recompute gives one process's losses
# unchanged. --expert-parallel under mpirun: a size that does not divide the experts or the
# world is refused by name before any work; a valid one runs each rank's share of the experts on
# the rows its group sends them (all-to-all), and gives one process's losses at N = 2 over 2
# ranks (ZeRO 0-3), N = 3 over 3 ranks (ZeRO 1, 3) and N = 2 over 4 ranks (ZeRO 1, 2: the
# experts data parallel over 2 ranks); a rank holds only its experts' weights and AdamW states
# (by the allocator's peaks); a rank killed as it enters a dispatch ends the job within
# --comm-timeout; a checkpoint written at N = 2 resumes without expert parallelism, and one
# written without it resumes at N = 2. The one-process refusals are in moe_test.sh.
# Skips (prints "SKIP: ...") without mpirun or an MPI build.
# Usage: bash dist_moe_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

mpi_e2e_init
mpi_flags=("${MPIRUN[@]:1}")
run=(benchmark --model tiny-moe --steps 3 --seq-len 32 --batch-size 2)

# within REF GOT WHAT [BOUND]: the largest |difference| of two JSON loss lists, failing above
# BOUND (default 1e-6). Observed: 0 (bitwise) for every f32 check here; 1e-6 leaves room for a
# summation order another MPI reduction algorithm might choose, far below the printed 4th decimal.
within() {
  perl -MJSON::PP -e '
    my ($ref, $got, $what, $bound) = @ARGV;
    my @a = @{decode_json($ref)}; my @b = @{decode_json($got)};
    die "$what: ".scalar(@b)." losses, expected ".scalar(@a)."\n" unless @a == @b && @a > 0;
    my $max = 0;
    for my $i (0 .. $#a) { my $d = abs($a[$i] - $b[$i]); $max = $d if $d > $max; }
    die "$what: losses differ from one process by $max (bound $bound): @b vs @a\n" if $max > $bound;
    print "  ok: $what: losses equal one process'"'"'s (max |diff| $max)\n";' "$1" "$2" "$3" "${4:-1e-6}"
}

echo "check: one process with --grad-accum 2 (the reference), and with selective recompute"
"$LJ" "${run[@]}" --grad-accum 2 --out ref.jsonl >ref.out 2>ref.err || { cat ref.err >&2; fail "reference run failed"; }
ref_losses=$(json_get ref.jsonl 1 losses)
pass "reference losses $ref_losses"
"$LJ" "${run[@]}" --grad-accum 2 --recompute selective --out sel.jsonl >sel.out 2>sel.err ||
  { cat sel.err >&2; fail "selective recompute failed"; }
grep -Eq '^ +recompute = selective' sel.out || { cat sel.out >&2; fail "selective recompute is not in the configuration"; }
within "$ref_losses" "$(json_get sel.jsonl 1 losses)" "selective recompute" || fail "selective recompute changed the losses"

for z in 0 1 2 3; do
  echo "check: mpirun -np 2 ljperf benchmark --model tiny-moe --zero $z"
  rc=0
  timeout 300 mpirun "${mpi_flags[@]}" -np 2 "$LJ" "${run[@]}" --zero "$z" --out "d$z.jsonl" >"d$z.out" 2>"d$z.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "d$z.out" "d$z.err" >&2; fail "--zero $z exited $rc"; }
  [ "$(json_get "d$z.jsonl" 1 config.zero_stage)" = "$z" ] || fail "--zero $z: config.zero_stage is not $z"
  within "$ref_losses" "$(json_get "d$z.jsonl" 1 losses)" "ZeRO $z at 2 ranks" || fail "--zero $z: losses differ"
done

echo "check: --expert-parallel under mpirun -np 2"
# refused CASE WANT ARGS...: exit non-zero, one error line holding WANT, a hint, no output folder.
refused() {
  local name=$1 want=$2
  shift 2
  local rc=0
  timeout 120 mpirun "${mpi_flags[@]}" -np 2 "$LJ" "$@" >"$name.out" 2>"$name.err" || rc=$?
  [ "$rc" -ne 0 ] || { cat "$name.out" >&2; fail "$name: exited 0"; }
  grep -qF -- "$want" "$name.err" || { cat "$name.err" >&2; fail "$name: no '$want'"; }
  grep -q 'hint:' "$name.err" || { cat "$name.err" >&2; fail "$name: no hint"; }
  [ ! -e "$name.dir" ] || fail "$name: the refused run wrote $(ls "$name.dir")"
  pass "$name: $(grep -m1 'error:' "$name.err")"
}
make_llmc_tokens tok.bin 20000 256
train=(train --model tiny-moe --data tok.bin --steps 1 --batch-size 2 --seq-len 32)
refused ep4_world "--expert-parallel 4 does not divide the world size 2" "${train[@]}" --out ep4_world.dir --expert-parallel 4
refused ep3_experts "--expert-parallel 3 does not divide the 8 experts of model 'tiny-moe'" "${train[@]}" --out ep3_experts.dir --expert-parallel 3

# Expert parallelism: each rank of a group of N runs E / N experts, and the routed rows travel to
# them and back by all-to-all. The reference is one process over the same global batch
# (--grad-accum N, as above), on one thread like the ranks. The bound is within's 1e-6.
# Observed: max |diff| 0 in every check below (N = 2 at ZeRO 0-3 and with --compile and
# selective recompute; N = 3 at ZeRO 1 and 3), and 1.2e-7 for N = 2 over 4 ranks (each expert's
# gradient there sums two ranks' GEMMs, the reference four micro-batches'). Bitwise is not
# promised: an expert's weight gradient is one GEMM over the rows of every rank of its group,
# where the reference sums one GEMM per micro-batch.
ep_run=(benchmark --steps 3 --seq-len 32 --batch-size 2 --threads 1)
# ep_check NAME NP N REF MODEL ARGS...: mpirun -np NP ... --expert-parallel N matches REF, and
# rank 0 ran its share of the experts through the exchange.
ep_check() {
  local name=$1 np=$2 n=$3 ref=$4 model=$5
  shift 5
  local rc=0
  timeout 300 mpirun "${mpi_flags[@]}" -np "$np" "$LJ" "${ep_run[@]}" --model "$model" --expert-parallel "$n" \
    "$@" --out "$name.jsonl" >"$name.out" 2>"$name.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$name.out" "$name.err" >&2; fail "$name exited $rc"; }
  grep -Eq '^ +expert_parallel = '"$n"' +\(--expert-parallel\)' "$name.out" ||
    { cat "$name.out" >&2; fail "$name: expert_parallel is not in the configuration"; }
  grep -q "^expert parallel: groups of $n ranks; rank 0 holds and runs experts \[0, " "$name.out" ||
    { cat "$name.out" >&2; fail "$name: no expert-parallel line"; }
  # 2 sparse layers x (route, dispatch and combine forward; combine and dispatch backward).
  grep -q " 10 exchange nodes " "$name.out" || { grep '^expert parallel' "$name.out" >&2; fail "$name: not 10 exchange nodes"; }
  [ "$(json_get "$name.jsonl" 1 resolved.expert_parallel.value)" = "$n" ] || fail "$name: the record has no expert_parallel $n"
  within "$ref" "$(json_get "$name.jsonl" 1 losses)" "$name" "${EP_BOUND:-1e-6}" || fail "$name: losses differ"
}
echo "check: --expert-parallel 2 over 2 ranks (4 of tiny-moe's 8 experts each), ZeRO 0-3"
"$LJ" "${ep_run[@]}" --model tiny-moe --grad-accum 2 --out ep_ref2.jsonl >ep_ref2.out 2>ep_ref2.err ||
  { cat ep_ref2.err >&2; fail "the one-process reference (grad-accum 2) failed"; }
ep_ref2=$(json_get ep_ref2.jsonl 1 losses)
for z in 0 1 2 3; do
  ep_check "ep2_zero$z" 2 2 "$ep_ref2" tiny-moe --zero "$z"
done
ep_check ep2_compile 2 2 "$ep_ref2" tiny-moe --compile --recompute selective

echo "check: --expert-parallel 2 in bf16 and fp16 (ZeRO 1) against one process in the same precision"
# Bound 1e-3 on losses of 5.6: observed 1.1e-4 (bf16) and 2.4e-6 (fp16) at ZeRO 0 and 2 (AMD
# EPYC, 2026-12-04), 1.5e-4 over 8 steps; in f32 (above) the same runs are bitwise. The cause is
# not established: likely that a rank's expert GEMMs take its own rows and its partner's in one
# call, where one process runs a micro-batch a call, so sums round to 16 bits at other points.
for p in bf16 fp16; do
  "$LJ" "${ep_run[@]}" --model tiny-moe --grad-accum 2 --precision "$p" --out "ep_ref_$p.jsonl" \
    >"ep_ref_$p.out" 2>"ep_ref_$p.err" || { cat "ep_ref_$p.err" >&2; fail "the $p reference failed"; }
  EP_BOUND=1e-3 ep_check "ep2_$p" 2 2 "$(json_get "ep_ref_$p.jsonl" 1 losses)" tiny-moe --zero 1 \
    --precision "$p"
done

echo "check: a rank holds only its experts: 4 of 8, so half of their weights and AdamW states"
# tiny-moe's expert weights: 2 sparse layers x (gate_up 8 x 256 x 64 + down 8 x 64 x 128) =
# 393,216 f32. At ZeRO 0 a rank of --expert-parallel 2 holds 196,608 of them fewer than a data
# parallel rank (786,432 bytes), and as many fewer of m and of v; the allocator's peaks by
# category (the benchmark record) must differ by exactly that.
peak() { json_get "$1" 1 "summary.bytes_peak_by_category.$2"; }
for cat in weights optimizer; do
  want=786432
  [ "$cat" = weights ] || want=$((2 * 786432))
  got=$(($(peak d0.jsonl "$cat") - $(peak ep2_zero0.jsonl "$cat")))
  [ "$got" -eq "$want" ] || fail "$cat: the expert-parallel rank holds $got bytes fewer, not $want"
  pass "$cat: $got bytes fewer per rank at --expert-parallel 2"
done

echo "check: --expert-parallel 2 over 4 ranks (experts data parallel over 2 ranks), ZeRO 1 and 2"
"$LJ" "${ep_run[@]}" --model tiny-moe --grad-accum 4 --out ep_ref4.jsonl >ep_ref4.out 2>ep_ref4.err ||
  { cat ep_ref4.err >&2; fail "the one-process reference (grad-accum 4) failed"; }
ep_ref4=$(json_get ep_ref4.jsonl 1 losses)
for z in 1 2; do
  ep_check "ep2_np4_zero$z" 4 2 "$ep_ref4" tiny-moe --zero "$z"
done

echo "check: --expert-parallel 3 over 3 ranks (a Mixtral of 6 experts, 2 each), ZeRO 1 and 3"
cat >moe6.json <<'JSON'
{
  "architectures": ["MixtralForCausalLM"],
  "model_type": "mixtral",
  "vocab_size": 256,
  "hidden_size": 64,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "head_dim": 16,
  "intermediate_size": 128,
  "max_position_embeddings": 256,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "hidden_act": "silu",
  "tie_word_embeddings": false,
  "sliding_window": null,
  "num_local_experts": 6,
  "num_experts_per_tok": 2,
  "output_router_logits": true,
  "router_aux_loss_coef": 0.02
}
JSON
"$LJ" "${ep_run[@]}" --model "$TMP/moe6.json" --grad-accum 3 --out ep_ref3.jsonl >ep_ref3.out 2>ep_ref3.err ||
  { cat ep_ref3.err >&2; fail "the one-process reference (grad-accum 3) failed"; }
ep_ref3=$(json_get ep_ref3.jsonl 1 losses)
for z in 1 3; do
  ep_check "ep3_zero$z" 3 3 "$ep_ref3" "$TMP/moe6.json" --zero "$z"
done

echo "check: a rank killed as it enters a dispatch all-to-all ends the job within --comm-timeout"
start=$(date +%s%N)
rc=0
LJ_TEST_KILL_AT=dispatch:3:1 timeout 120 mpirun "${mpi_flags[@]}" -np 2 "$LJ" "${ep_run[@]}" --model tiny-moe \
  --expert-parallel 2 --comm-timeout 5 >kill.out 2>kill.err || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ "$rc" -ne 0 ] || fail "the job with a killed rank exited 0"
[ "$rc" -ne 124 ] || fail "the job with a killed rank hung until the test's timeout"
[ "$ms" -lt 15000 ] || fail "the job took $ms ms to end (timeout 5 s)"
pass "killed rank 1 at its 3rd dispatch: the job ended in $ms ms with exit $rc"

echo "check: a checkpoint written at --expert-parallel 2 resumes without it"
# The expert weights are whole in the checkpoint, so the size may change at a resume: 2 steps
# at --expert-parallel 2 then 2 more without it give the losses of the same two runs without it
# (the same runs: --steps changes the LR schedule).
# step_losses DIR: the losses of metrics.jsonl by step, as a JSON list from step 3 on.
step_losses() {
  perl -MJSON::PP -ne 'my $j = decode_json($_); $l{$j->{step}} = $j->{loss} if exists $j->{loss};
    END { print encode_json([map { $l{$_} } grep { $_ >= 3 } sort { $a <=> $b } keys %l]) }' "$1/metrics.jsonl"
}
rs_run() { timeout 300 mpirun "${mpi_flags[@]}" -np 2 "$LJ" train --model tiny-moe --data tok.bin --batch-size 2 \
  --seq-len 32 --threads 1 --zero "${RS_ZERO:-1}" --checkpoint-every 2 "$@"; }
rs_run --steps 2 --expert-parallel 2 --out rs.dir >rs1.out 2>rs1.err || { cat rs1.err >&2; fail "the expert-parallel run failed"; }
rs_run --steps 4 --out rs.dir >rs2.out 2>rs2.err || { cat rs2.err >&2; fail "the resume without expert parallelism failed"; }
grep -q 'resumed from step 2)' rs2.out || { cat rs2.out >&2; fail "the second run did not resume from step 2"; }
rs_run --steps 2 --out dp.dir >dp1.out 2>dp1.err || { cat dp1.err >&2; fail "the reference's first run failed"; }
rs_run --steps 4 --out dp.dir >dp2.out 2>dp2.err || { cat dp2.err >&2; fail "the reference's resume failed"; }
within "$(step_losses dp.dir)" "$(step_losses rs.dir)" "steps 3-4 resumed from an expert-parallel checkpoint" ||
  fail "the resumed run differs"

echo "check: a checkpoint written without expert parallelism resumes at --expert-parallel 2 (ZeRO 2)"
RS_ZERO=2 rs_run --steps 2 --out rv.dir >rv1.out 2>rv1.err || { cat rv1.err >&2; fail "the data-parallel run failed"; }
RS_ZERO=2 rs_run --steps 4 --expert-parallel 2 --out rv.dir >rv2.out 2>rv2.err ||
  { cat rv2.err >&2; fail "the resume at --expert-parallel 2 failed"; }
grep -q 'resumed from step 2)' rv2.out || { cat rv2.out >&2; fail "the expert-parallel run did not resume from step 2"; }
RS_ZERO=2 rs_run --steps 2 --out rv_dp.dir >rvd1.out 2>rvd1.err || { cat rvd1.err >&2; fail "the reference's first run failed"; }
RS_ZERO=2 rs_run --steps 4 --out rv_dp.dir >rvd2.out 2>rvd2.err || { cat rvd2.err >&2; fail "the reference's resume failed"; }
within "$(step_losses rv_dp.dir)" "$(step_losses rv.dir)" "steps 3-4 at --expert-parallel 2, resumed from a data-parallel checkpoint" ||
  fail "the expert-parallel resume differs"

e2e_finish
