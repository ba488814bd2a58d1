#!/usr/bin/env bash
# The host time model's MPI collectives (src/probe/comm_rates.h) against a measurement: measures
# this host's collectives for N ranks (mpirun -np N ljperf calibrate --comm), runs
# `ljperf ablation --model small --np N` (each row's exposed comm per step, measured), then plans
# each row's configuration (`ljperf plan`, same model, batch, threads, overlap_comm, compile,
# recompute) and prints predicted against measured exposed communication per step.
# Usage: bench/plan/comm/check.sh [path/to/ljperf] [N] [ablation results.json to reuse]
#   DEEPSPEED=file.json: a DeepSpeed config for every run and plan (its zero_optimization
#   overlap_comm is overridden per row, as the ablation does), e.g. a small reduce_bucket_size so
#   that several buckets overlap backward: bench/plan/comm/buckets_1m.json.
# Needs mpirun; runs as root with Open MPI's --allow-run-as-root --oversubscribe. Minutes.
set -euo pipefail
lj=$(realpath "${1:-build/ljperf}")
np=${2:-2}
results=${3:-}
ds_base=${DEEPSPEED:-}
[ -z "$ds_base" ] || ds_base=$(realpath "$ds_base")
work=$(mktemp -d -t ljperf-comm-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun -np "$np")
if mpirun --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
  mpirun+=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"${mpirun[@]}" "$lj" calibrate --comm
if [ -z "$results" ]; then
  "$lj" ablation --model small --np "$np" --threads 1 --out "$work/ablation" \
    ${ds_base:+--deepspeed "$ds_base"} >"$work/ablation.txt"
  results="$work/ablation/results.json"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# One line per ablation row: name, overlap_comm, compile, recompute, measured exposed s/step.
perl -MJSON::PP -e '
  my $j = decode_json(do { local $/; <STDIN> });
  for my $r (@{ $j->{rows} }) {
    next unless $r->{available} && defined $r->{median}{comm_exposed_s_per_step};
    printf "%s\t%s\t%s\t%s\t%.6f\n", $r->{name}, ($r->{overlap_comm} ? "true" : "false"),
      ($r->{flags} =~ /--compile/ ? "yes" : "no"), $r->{recompute},
      $r->{median}{comm_exposed_s_per_step};
  }' <"$results" >"$work/rows.tsv"
printf "%-22s %12s %12s %8s\n" "row (np $np)" "measured" "predicted" "error"
while IFS=$'\t' read -r name overlap compile recompute measured; do
  # The row's DeepSpeed config: DEEPSPEED's keys (or none) with overlap_comm set as the row ran.
  perl -MJSON::PP -e '
    my ($base, $overlap) = @ARGV;
    my $j = {};
    if ($base ne "") { open(my $f, "<", $base) or die "$base: $!\n"; local $/; $j = decode_json(<$f>); }
    $j->{zero_optimization}{overlap_comm} = $overlap eq "true" ? JSON::PP::true : JSON::PP::false;
    print JSON::PP->new->canonical->encode($j);
  ' "$ds_base" "$overlap" >"$work/ds.json"
  args=(plan --json --model small --np "$np" --threads 1 --deepspeed "$work/ds.json")
  [ "$compile" = yes ] && args+=(--compile)
  # The row's recompute as the run reports it: "none", or the policy and then its layer count.
  policy=$(echo "$recompute" | grep -oE '^[a-z]+' || true)
  args+=(--recompute "${policy:-none}")
  if [ "${policy:-none}" != none ]; then
    args+=(--recompute-layers "$(echo "$recompute" | grep -oE '[0-9]+' | head -1)")
  fi
  "$lj" "${args[@]}" >"$work/plan.json"
  perl -MJSON::PP -e '
    my ($name, $measured) = @ARGV;
    my $j = decode_json(do { local $/; <STDIN> });
    my $c = $j->{candidates}[0];
    die "error: the plan priced no collectives (no comm rates cached)\n" unless $j->{comm_measured};
    my $p = $c->{step_times}{collective} // 0;
    printf "%-22s %10.1f ms %10.1f ms %+7.1f%%\n", $name, 1e3 * $measured, 1e3 * $p,
      100 * ($p / $measured - 1);
  ' "$name" "$measured" <"$work/plan.json"
done <"$work/rows.tsv"
