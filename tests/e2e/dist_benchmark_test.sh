# `mpirun -np 2 ljperf benchmark` as a user runs it: data parallel with ZeRO 0, 1, 2 and 3. Checks:
# exit 0, one summary (only rank 0 prints), losses equal to one process with --grad-accum 2 (the
# same global batches), one result record with world_size, stage and per-rank figures, and each
# rank's optimizer memory at stage 1/2 below stage 0. Bad input: --zero 4 is a clear error.
# Skips (prints "SKIP: ...", which CTest reports as skipped) without mpirun or an MPI build.
# Usage: bash dist_benchmark_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

mpi_e2e_init
mpi_flags=("${MPIRUN[@]:1}")
run=(benchmark --model tiny --steps 3 --seq-len 64 --batch-size 2)

echo "check: one process with --grad-accum 2 (the reference)"
"$LJ" "${run[@]}" --grad-accum 2 --out ref.jsonl >ref.out 2>ref.err || { cat ref.err >&2; fail "reference run failed"; }
ref_losses=$(json_get ref.jsonl 1 losses)
pass "reference losses $ref_losses"

for z in 0 1 2 3; do
  echo "check: mpirun -np 2 ljperf benchmark --zero $z"
  rc=0
  timeout 300 mpirun "${mpi_flags[@]}" -np 2 "$LJ" "${run[@]}" --zero "$z" --out "d$z.jsonl" >"d$z.out" 2>"d$z.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "d$z.out" "d$z.err" >&2; fail "--zero $z exited $rc"; }
  [ "$(grep -c '^summary:' "d$z.out")" -eq 1 ] || { cat "d$z.out" >&2; fail "--zero $z: expected one summary"; }
  [ "$(grep -c '^ljperf benchmark:' "d$z.out")" -eq 1 ] || fail "--zero $z: expected one header"
  steps=$(grep -cE '^step: +[0-9]+ +loss: ' "d$z.err" || true)
  [ "$steps" -eq 3 ] || { cat "d$z.err" >&2; fail "--zero $z: expected 3 step lines (rank 0's), got $steps"; }
  if grep -q '^rank ' "d$z.out" "d$z.err"; then fail "--zero $z: a rank printed an error line"; fi
  grep -Eq "zero_optimization.stage = $z +\(flag\)" "d$z.out" || fail "--zero $z: the stage is not printed"
  grep -Eq '^data parallel: 2 ranks \(communicator: mpi\)' "d$z.out" || fail "--zero $z: no data-parallel line"
  grep -Eq '^ +comm/step +p50 ' "d$z.out" || fail "--zero $z: no comm/step line"
  # DeepSpeed's code default: overlap_comm only at stage 3.
  overlap=off; [ "$z" -eq 3 ] && overlap=on
  grep -Eq "^ +exposed comm +p50 .*overlapped [0-9]+% \(overlap_comm $overlap\)" "d$z.out" ||
    fail "--zero $z: no exposed comm line with overlap_comm $overlap"
  grep -Eq '^ +peak RSS per rank \(VmHWM\) +[0-9.]+ [KMG]iB, [0-9.]+ [KMG]iB' "d$z.out" ||
    fail "--zero $z: no per-rank peak RSS line"
  [ "$(json_count "d$z.jsonl")" -eq 1 ] || fail "--zero $z: expected one result record (rank 0 writes it)"
  [ "$(json_get "d$z.jsonl" 1 config.world_size)" = 2 ] || fail "--zero $z: config.world_size is not 2"
  [ "$(json_get "d$z.jsonl" 1 config.zero_stage)" = "$z" ] || fail "--zero $z: config.zero_stage is not $z"
  for key in summary.tokens_per_s_per_rank summary.process_peak_rss_bytes_per_rank \
    summary.optimizer_bytes_per_rank summary.comm_s_per_step_per_rank \
    summary.comm_exposed_s_per_step_per_rank; do
    n=$(json_get "d$z.jsonl" 1 "$key" | tr ',' '\n' | grep -c '[0-9]')
    [ "$n" -eq 2 ] || fail "--zero $z: $key has $n entries, expected 2"
  done
  # Rank r takes global micro-batches r, 2 + r, ... (dist/batch_shard.h): the same batches as one
  # process with accumulation 2, averaged the same way. Observed: bitwise-equal losses at every
  # stage (the dist tests see the same); the bound 1e-6 leaves room for a summation order that
  # a different MPI reduction algorithm might choose, far below the 4th decimal printed.
  perl -MJSON::PP -e '
    my ($ref, $got, $z) = @ARGV;
    my @a = @{decode_json($ref)}; my @b = @{decode_json($got)};
    die "stage $z: ".scalar(@b)." losses, expected ".scalar(@a)."\n" unless @a == @b;
    my $max = 0;
    for my $i (0 .. $#a) { my $d = abs($a[$i] - $b[$i]); $max = $d if $d > $max; }
    die "stage $z: losses differ from one process with --grad-accum 2 by $max (bound 1e-6)\n" if $max > 1e-6;
    print "  ok: stage $z losses equal the reference (max |diff| $max)\n";' \
    "$ref_losses" "$(json_get "d$z.jsonl" 1 losses)" "$z" || fail "--zero $z: losses differ"
done

echo "check: each rank's optimizer states at ZeRO 1, 2 and 3 are below ZeRO 0 (about half at N=2)"
perl -MJSON::PP -e '
  my @opt = map { decode_json($_) } @ARGV;
  for my $z (1, 2, 3) {
    for my $r (0, 1) {
      my ($s0, $s) = ($opt[0][$r], $opt[$z][$r]);
      die "rank $r: stage $z holds $s bytes of optimizer states, stage 0 $s0\n" unless $s < $s0;
      # m and v over ceil(numel / 2) elements, each block rounded up to 512 bytes.
      die "rank $r: stage $z holds $s, more than half of $s0 plus rounding\n" if $s > $s0 / 2 + 2048;
    }
  }
  printf "  ok: optimizer bytes per rank: stage 0 %s, stage 1 %s, stage 2 %s, stage 3 %s\n",
    map { join("/", @$_) } @opt;' \
  "$(json_get d0.jsonl 1 summary.optimizer_bytes_per_rank)" \
  "$(json_get d1.jsonl 1 summary.optimizer_bytes_per_rank)" \
  "$(json_get d2.jsonl 1 summary.optimizer_bytes_per_rank)" \
  "$(json_get d3.jsonl 1 summary.optimizer_bytes_per_rank)" || fail "optimizer states not sharded"
note "peak RSS per rank (VmHWM): stage 0 $(json_get d0.jsonl 1 summary.process_peak_rss_bytes_per_rank), stage 1 $(json_get d1.jsonl 1 summary.process_peak_rss_bytes_per_rank), stage 2 $(json_get d2.jsonl 1 summary.process_peak_rss_bytes_per_rank); predicted per rank $(json_get d0.jsonl 1 plan.predicted_peak_rss_bytes), $(json_get d1.jsonl 1 plan.predicted_peak_rss_bytes), $(json_get d2.jsonl 1 plan.predicted_peak_rss_bytes)"

echo "check: WORLD_SIZE=2 without an MPI launcher is refused (each process would train alone)"
rc=0
WORLD_SIZE=2 RANK=0 "$LJ" "${run[@]}" >w.out 2>w.err || rc=$?
[ "$rc" -ne 0 ] || fail "WORLD_SIZE=2 without mpirun exited 0"
grep -q "WORLD_SIZE=2 but no MPI launcher started this process" w.err || { cat w.err >&2; fail "no clear error"; }
pass "$(grep -m1 'error:' w.err)"

e2e_finish
