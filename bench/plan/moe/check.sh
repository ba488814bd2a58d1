#!/usr/bin/env bash
# The host time model of a mixture of experts against a measurement: one process, data parallel
# over N ranks, and expert parallel over N ranks (the token exchange priced as all-to-alls from
# this host's rates, the grouped GEMMs by the rows a rank receives: src/plan/time_model.cc,
# src/graph/moe_rows.h). Measures this host's MPI collectives for N ranks (mpirun -np N ljperf
# calibrate --comm, all_to_all included), runs `ljperf benchmark` for each configuration, then
# `ljperf plan` for the same one, and prints measured against predicted step time and the
# predicted exchange, then the largest rank's peak RSS against the plan's per-rank peak.
# Usage: bench/plan/moe/check.sh [path/to/ljperf] [N]
#   MODEL (default bench/peers/models/mixtral-h256/config.json: hidden 256, 8 experts, top 2,
#   4 layers), BATCH (4), SEQ (256), STEPS (8).
# Needs mpirun; runs as root with Open MPI's --allow-run-as-root --oversubscribe. Minutes. Take
# the figures on a quiet host: N ranks of one thread each, N <= the cores.
set -euo pipefail
lj=$(realpath "${1:-build/ljperf}")
np=${2:-2}
model=$(realpath "${MODEL:-bench/peers/models/mixtral-h256/config.json}")
batch=${BATCH:-4}
seq=${SEQ:-256}
steps=${STEPS:-8}
work=$(mktemp -d -t ljperf-moe-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun -np "$np")
if mpirun --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
  mpirun+=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"${mpirun[@]}" "$lj" calibrate --comm | grep -E '^MPI|all_to_all'
common=(--model "$model" --batch-size "$batch" --seq-len "$seq" --threads 1)
printf "%-28s %12s %12s %8s %14s %11s %11s %8s\n" "configuration" "measured" "predicted" "error" \
  "exchange (pred)" "peak MiB" "predicted" "error"
# row NAME RANKS EP: measure, plan, print.
row() {
  local name=$1 ranks=$2 ep=$3 launch=()
  [ "$ranks" -gt 1 ] && launch=("${mpirun[@]}")
  local ep_flag=()
  [ "$ep" -gt 1 ] && ep_flag=(--expert-parallel "$ep")
  "${launch[@]}" "$lj" benchmark "${common[@]}" "${ep_flag[@]}" --steps "$steps" \
    --out "$work/$name.jsonl" >"$work/$name.out" 2>&1 || { cat "$work/$name.out" >&2; exit 1; }
  "$lj" plan --json "${common[@]}" --np "$ranks" "${ep_flag[@]}" --recompute none \
    >"$work/$name.plan.json" 2>"$work/$name.plan.err" || { cat "$work/$name.plan.err" >&2; exit 1; }
  perl -MJSON::PP -e '
    my ($name, $run, $plan) = @ARGV;
    open(my $r, "<", $run) or die; my $m = decode_json(scalar <$r>);
    open(my $p, "<", $plan) or die; local $/; my $j = decode_json(<$p>);
    my $measured = $m->{summary}{step_s_p50};
    my $c = $j->{candidates}[0];
    # Peak memory: the largest rank'"'"'s process peak RSS against the plan'"'"'s (per rank).
    my $rss = 0;
    for my $b (@{$m->{summary}{process_peak_rss_bytes_per_rank} // [$m->{summary}{process_peak_rss_bytes}]}) {
      $rss = $b if $b > $rss;
    }
    printf "%-28s %10.1f ms %10.1f ms %+7.1f%% %11.1f ms %11.1f %11.1f %+7.1f%%\n", $name,
      1e3 * $measured, 1e3 * $c->{step_seconds}, 100 * ($c->{step_seconds} / $measured - 1),
      1e3 * ($c->{expert_exchange_seconds} // 0), $rss / 1048576, $c->{peak_bytes} / 1048576,
      100 * ($c->{peak_bytes} / $rss - 1);
  ' "$name" "$work/$name.jsonl" "$work/$name.plan.json"
}
row "one process" 1 1
row "data parallel x$np" "$np" 1
row "expert parallel x$np" "$np" "$np"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
