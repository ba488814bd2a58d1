#!/usr/bin/env bash
# The compile ablation: `ljperf benchmark` eager against `--compile` on the same model and
# shape, in one script, with the runs interleaved so that load drifts hit both alike.
#   bench/compile/ablation.sh [--ljperf build/ljperf] [--reps 3] [benchmark flags...]
# Prints: tokens/s (median over reps of each run's median step) and the ratio; process peak RSS
# and ljperf's peak and the ratios; kernels per step; kernel time per op category eager and
# compiled (--profile runs); cold and warm compile (an empty kernel cache, then the same one);
# and that a second sequence length compiles no new kernel.
set -euo pipefail
ljperf=build/ljperf
reps=3
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -x "$ljperf" ] || { echo "error: $ljperf is not an executable (build first or pass --ljperf)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LJ_KERNEL_CACHE=$work/kernels
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

field() {  # field FILE TEXT: the first number after TEXT (a fixed string) on its line
  grep -m1 -F "$2" "$1" | awk -v t="$2" '{s = substr($0, index($0, t) + length(t));
    match(s, /[0-9]+(\.[0-9]+)?/); print substr(s, RSTART, RLENGTH)}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "== compile time (cold: empty kernel cache; warm: the same cache)"
"$ljperf" benchmark "${args[@]}" --compile --steps 2 --skip-steps 1 >"$work/cold.txt" 2>&1
"$ljperf" benchmark "${args[@]}" --compile --steps 2 --skip-steps 1 >"$work/warm.txt" 2>&1
for k in cold warm; do
  printf '%-5s step built in %s s; %s\n' "$k" "$(field "$work/$k.txt" 'compile: on (')" \
    "$(grep -m1 'generated kernels:' "$work/$k.txt" | sed 's/generated kernels: //')"
done
"$ljperf" benchmark "${args[@]}" --compile --seq-len 128 --steps 2 --skip-steps 1 \
  >"$work/seq128.txt" 2>&1
printf 'seq 128 after seq 256: %s\n' \
  "$(grep -m1 'generated kernels:' "$work/seq128.txt" | sed 's/generated kernels: //')"

echo "== throughput and memory: $reps interleaved pairs (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq "$reps"); do
  "$ljperf" benchmark "${args[@]}" >"$work/eager.$r.txt" 2>&1
  "$ljperf" benchmark "${args[@]}" --compile >"$work/compiled.$r.txt" 2>&1
done
for m in eager compiled; do
  tps=$(for r in $(seq "$reps"); do field "$work/$m.$r.txt" 'tokens/s'; done | median)
  rss=$(for r in $(seq "$reps"); do field "$work/$m.$r.txt" 'process peak RSS'; done | median)
  peak=$(grep -m1 '^total' "$work/$m.1.txt" | awk '{print $4, $5}')
  kern=$(field "$work/$m.1.txt" 'kernels/step')
  echo "$m: tokens/s $tps (runs: $(for r in $(seq "$reps"); do field "$work/$m.$r.txt" 'tokens/s'; done | tr '\n' ' '))  process peak RSS $rss MiB  ljperf peak $peak  kernels/step $kern"
  eval "${m}_tps=$tps ${m}_rss=$rss"
done
awk -v a="$compiled_tps" -v b="$eager_tps" 'BEGIN {printf "tokens/s ratio compiled/eager: %.3f\n", a / b}'
awk -v a="$compiled_rss" -v b="$eager_rss" 'BEGIN {printf "peak RSS ratio compiled/eager: %.3f\n", a / b}'

echo "== kernel time per op category (--profile; per measured step)"
for m in eager compiled; do
  flag=""
  [ "$m" = compiled ] && flag=--compile
  "$ljperf" benchmark "${args[@]}" $flag --profile >"$work/profile.$m.txt" 2>&1
  echo "-- $m"
  sed -n '/kernel time by op category/,$p' "$work/profile.$m.txt" | sed '1d'
done
