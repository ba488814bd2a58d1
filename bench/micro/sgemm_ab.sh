#!/usr/bin/env bash
# The in-tree AVX-512 GEMM against oneDNN's dnnl_sgemm (bench/micro/sgemm_bench.cc), both in one
# process, interleaved per shape, several rounds at 1 and 2 threads. Per shape and thread count:
# the median and the best GFLOP/s per CPU second of each side over the rounds, and ours / oneDNN
# of the medians. Prints the load before and after.
#   bench/micro/sgemm_ab.sh [--bin build/micro_bench] [--rounds 5] [--threads "1 2"]
#                           [--filter REGEX]   (shape names, default all)
set -euo pipefail
bin=build/micro_bench rounds=5 threads="1 2" filter="[a-z_]+"
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "error: unknown flag '$1' (see --help)" >&2; exit 1 ;;
  esac
done
[ -x "$bin" ] || { echo "error: '$bin' is not an executable (build micro_bench, or pass --bin)" >&2; exit 1; }
# Idle OpenMP workers sleep rather than spin, so process CPU time is the GEMM work (as ab.sh).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load before: $(uptime)"
for _ in $(seq "$rounds"); do
  for t in $threads; do
    OMP_NUM_THREADS=$t "$bin" --benchmark_filter="^sgemm/(onednn|ljperf)/($filter)/" \
      --benchmark_min_time=0.1 2>/dev/null |
      sed -nE "s#^sgemm/([a-z]+)/([a-z_]+)/process_time.*GFLOPs_cpu=([0-9.]+)/s.*#$t \1 \2 \3#p" >>"$out"
  done
done
echo "load after:  $(uptime)"
printf '%-16s %3s %14s %14s %8s\n' shape thr "onednn med/best" "ljperf med/best" "ratio"
for t in $threads; do
  awk -v t="$t" '$1 == t {print $3}' "$out" | awk '!seen[$0]++' | while read -r shape; do
    stats() {
      awk -v t="$t" -v s="$shape" -v side="$1" '$1 == t && $2 == side && $3 == s {print $4}' "$out" |
        sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; print m, a[NR]}'
    }
    read -r om ob <<<"$(stats onednn)"
    read -r lm lb <<<"$(stats ljperf)"
    printf '%-16s %3s %7.1f/%6.1f %7.1f/%6.1f %8.3f\n' "$shape" "$t" "$om" "$ob" "$lm" "$lb" \
      "$(echo "$lm / $om" | bc -l)"
  done
done
