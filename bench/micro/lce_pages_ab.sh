#!/usr/bin/env bash
# The fused linear_cross_entropy kernel and its per-block GEMMs (bench/micro/loss_bench.cc,
# lce_pages and lce_block_gemms) on 4 KiB pages against huge pages (runtime/malloc_policy.h's
# advise_huge_pages), both in one process, each pair run back to back, several rounds. Per case:
# process CPU ms of each side (median over rounds) and huge / 4 KiB of the medians. Prints the load
# before and after.
#   bench/micro/lce_pages_ab.sh [--bin build/micro_bench] [--rounds 5] [--threads 2]
set -euo pipefail
bin=build/micro_bench rounds=5 threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "error: unknown flag '$1' (see --help)" >&2; exit 1 ;;
  esac
done
[ -x "$bin" ] || { echo "error: '$bin' is not an executable (build micro_bench, or pass --bin)" >&2; exit 1; }
[ -r /sys/kernel/mm/transparent_hugepage/enabled ] &&
  echo "THP mode: $(cat /sys/kernel/mm/transparent_hugepage/enabled)  (huge pages need [always] or [madvise])"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} OMP_NUM_THREADS=$threads
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load before: $(uptime)"
for _ in $(seq "$rounds"); do
  # name/args.../huge/process_time  real ms  cpu ms ...  ->  "case huge cpu_ms"
  "$bin" --benchmark_filter='^BM_lce_(pages|block_gemms)/' --benchmark_min_time=0.5 2>/dev/null |
    sed -nE 's#^BM_(lce_[a-z_]+)/([0-9]+)/([01])/[a-z_/:.0-9]* +[0-9.]+ ms +([0-9.]+) ms.*#\1/\2 \3 \4#p' >>"$out"
done
echo "load after:  $(uptime)"
printf '%-18s %10s %10s %8s\n' case "4K ms" "huge ms" "huge/4K"
awk '{print $1}' "$out" | awk '!seen[$0]++' | while read -r c; do
  med() { awk -v c="$c" -v h="$1" '$1 == c && $2 == h {print $3}' "$out" | sort -g |
    awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
  p=$(med 0) h=$(med 1)
  printf '%-18s %10.1f %10.1f %8.3f\n' "$c" "$p" "$h" "$(echo "$h / $p" | bc -l)"
done
echo "(lce_pages/0: small's head 2048 x 288 x 32000, /1: the wider model's 1024 x 1024 x 32000;"
echo " lce_block_gemms/0, 1, 2: the logits, dw and dx GEMMs of every 512-column block, 1 thread)"
