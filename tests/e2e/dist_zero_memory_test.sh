# Issue 11's memory claim, as a user measures it: `mpirun -np 2 ljperf benchmark --model small`
# at ZeRO stages 0-3 with buckets below the model (reduce and all-gather buckets 2e6 elements,
# HF's "auto" stage-3 prefetch 0.9 x hidden^2 = 74649 and persistence 10 x hidden = 2880, and a
# reuse distance of 74649 elements). Checks, for each rank: its peak RSS (VmHWM) by stage falls
# 3 < 2 < 1 < 0, and each is within 3% of the predictor's figure for that rank (the summary's
# `predicted per rank`, predicted_peak_rss_bytes_per_rank in the record). At DeepSpeed's default
# sizes the ordering cannot hold for `small` (bench/dist/RESULTS.md says why).
# Skips (prints "SKIP: ...") without mpirun or an MPI build.
# Usage: bash dist_zero_memory_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

mpi_e2e_init
mpi_flags=("${MPIRUN[@]:1}")
# The predictor's process baseline is measured per binary and thread count, and under mpirun
# only read from the cache: measure it here first, in a cache of this test's own.
export XDG_CACHE_HOME="$TMP/cache"
"$LJ" benchmark --model tiny --steps 2 --seq-len 64 >base.out 2>base.err ||
  { cat base.err >&2; fail "the one-process run that measures the baseline failed"; }

for z in 0 1 2 3; do
  cat >"z$z.json" <<EOF
{"train_micro_batch_size_per_gpu": 2,
 "zero_optimization": {"stage": $z, "reduce_bucket_size": 2000000, "allgather_bucket_size": 2000000,
   "stage3_prefetch_bucket_size": 74649, "stage3_param_persistence_threshold": 2880,
   "stage3_max_reuse_distance": 74649}}
EOF
  echo "check: mpirun -np 2 ljperf benchmark --model small --deepspeed z$z.json"
  rc=0
  timeout 300 mpirun "${mpi_flags[@]}" -x XDG_CACHE_HOME -x OMP_NUM_THREADS -np 2 "$LJ" benchmark \
    --model small --steps 3 --batch-size 2 --deepspeed "z$z.json" --out "z$z.jsonl" \
    >"z$z.out" 2>"z$z.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "z$z.out" "z$z.err" >&2; fail "stage $z exited $rc"; }
  grep -Eq '^ +predicted per rank +[0-9.]+ [KMG]iB, [0-9.]+ [KMG]iB ' "z$z.out" ||
    { cat "z$z.out" >&2; fail "stage $z: no per-rank prediction line"; }
  pass "stage $z: $(grep -E 'VmHWM' "z$z.out" | sed 's/^ *//') | $(grep -E 'predicted per rank' "z$z.out" | sed 's/^ *//')"
done

echo "check: each rank's peak by stage 3 < 2 < 1 < 0, each within 3% of its prediction"
# Observed (bench/dist/RESULTS.md): the predictor is 1.1-1.7% below the measured peak at every
# stage and rank; 3% is the issue's bound.
perl -MJSON::PP -e '
  my @m = map { decode_json($_) } @ARGV[0 .. 3];
  my @p = map { decode_json($_) } @ARGV[4 .. 7];
  my $bad = 0;
  for my $r (0, 1) {
    for my $z (0 .. 3) {
      die "stage $z: no figure for rank $r\n" unless defined $m[$z][$r] && defined $p[$z][$r];
      my $err = ($p[$z][$r] - $m[$z][$r]) / $m[$z][$r];
      printf "  rank %d stage %d: measured %.1f MiB, predicted %.1f MiB (%+.1f%%)\n", $r, $z,
        $m[$z][$r] / 2**20, $p[$z][$r] / 2**20, 100 * $err;
      if (abs($err) > 0.03) { print "  not within 3%\n"; $bad = 1 }
    }
    for my $z (1 .. 3) {
      next if $m[$z][$r] < $m[$z - 1][$r];
      printf "  rank %d: stage %d (%.1f MiB) is not below stage %d (%.1f MiB)\n", $r, $z,
        $m[$z][$r] / 2**20, $z - 1, $m[$z - 1][$r] / 2**20;
      $bad = 1;
    }
  }
  exit $bad;' \
  "$(json_get z0.jsonl 1 summary.process_peak_rss_bytes_per_rank)" \
  "$(json_get z1.jsonl 1 summary.process_peak_rss_bytes_per_rank)" \
  "$(json_get z2.jsonl 1 summary.process_peak_rss_bytes_per_rank)" \
  "$(json_get z3.jsonl 1 summary.process_peak_rss_bytes_per_rank)" \
  "$(json_get z0.jsonl 1 summary.predicted_peak_rss_bytes_per_rank)" \
  "$(json_get z1.jsonl 1 summary.predicted_peak_rss_bytes_per_rank)" \
  "$(json_get z2.jsonl 1 summary.predicted_peak_rss_bytes_per_rank)" \
  "$(json_get z3.jsonl 1 summary.predicted_peak_rss_bytes_per_rank)" ||
  fail "per-rank peak memory: ordering 3 < 2 < 1 < 0 or the 3% bound does not hold"
pass "stage 3 < 2 < 1 < 0 on both ranks, each within 3% of its prediction"

e2e_finish
