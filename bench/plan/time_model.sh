#!/usr/bin/env bash
# The planner's time model against measured steps, for every recompute choice, measured in ONE
# process round-robin (`ljperf plan --measure`): one step of every choice per round, so drift in
# clock frequency, page placement and other processes' load falls on every choice alike.
#
#   bench/plan/time_model.sh [--ljperf build/ljperf] [--out DIR] [--model small] [--batch-size 8]
#                            [--seq-len 256] [--rounds 12] [--warmup-rounds 1] [--threads 2]
#                            [--compile] [--precision fp32|bf16] [--no-calibrate]
#                            [--no-categories]
#
# 1. `ljperf calibrate --measure --threads T` remeasures this host's rates (probe/host_rates.h)
#    into the per-host cache, unless --no-calibrate.
# 2. `ljperf plan --device cpu --exhaustive --measure --rounds R --threads T --json`: the
#    predicted step and its categories for every recompute choice (none, selective and full x
#    block layers 1..L), then every choice run in this one process, round-robin, R rounds; per
#    round and choice the step's process CPU time / T and its wall time.
# 3. Unless --no-categories: `ljperf benchmark --profile --profile-clock cpu` of `none` and full
#    recompute of every layer (one process each): the measured categories on the same clock.
# 4. Prints (and writes $out/TIME_MODEL.md): predicted against measured per choice (median
#    over the rounds, CPU time / threads), the error, both rankings, Kendall's tau over every
#    pair and over the pairs the measurement resolves (paired sign-test interval of the
#    rounds' differences excludes 0), the measurement's split-half tau, each choice's cost over
#    `none` predicted and measured, the categories, and `uptime` before and after.
set -euo pipefail
args="$*"

ljperf=build/ljperf
out=$(mktemp -d /tmp/ljperf_time_model.XXXXXX)
model=small batch=8 seq=256 rounds=12 warmup=1 threads=2 compile="" calibrate=1 categories=1
precision=fp32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --seq-len) seq=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --warmup-rounds) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --compile) compile=--compile; shift ;;
    --precision) precision=$2; shift 2 ;;
    --no-calibrate) calibrate=0; shift ;;
    --no-categories) categories=0; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; echo "hint: see $0 --help" >&2; exit 2 ;;
  esac
done
[[ -x "$ljperf" ]] || { echo "error: $ljperf is not an executable" >&2; echo "hint: --ljperf build/ljperf" >&2; exit 2; }
mkdir -p "$out/runs"
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$threads
# The coefficients built into this ljperf, not a user's calibration (the rates cache is the
# host's: XDG_CACHE_HOME as set).
export XDG_CONFIG_HOME="$out/xdg"
here=$(cd "$(dirname "$0")" && pwd)
: > "$out/load.txt"
echo "calibrate $(uptime)" >> "$out/load.txt"
if [[ $calibrate == 1 ]]; then
  "$ljperf" calibrate --measure --threads "$threads" --out "$out/calibrate.json" > "$out/calibrate.log" 2>&1
  sed -n '/time model rates/,/rates cache/p' "$out/calibrate.log"
fi
echo "measure $(uptime)" >> "$out/load.txt"
echo "measuring every choice in one process, round-robin, $rounds rounds, $threads threads (progress: $out/measure.log)"
"$ljperf" plan --model "$model" --device cpu --batch-size "$batch" --seq-len "$seq" \
  --exhaustive --measure --rounds "$rounds" --warmup-rounds "$warmup" --threads "$threads" \
  --json $compile --precision "$precision" > "$out/plan.json" 2> "$out/measure.log" ||
  { echo "error: ljperf plan --measure failed, see $out/measure.log" >&2; tail -3 "$out/measure.log" >&2; exit 1; }
echo "measured $(uptime)" >> "$out/load.txt"
if [[ $categories == 1 ]]; then
  layers=$(jq -r '[.candidates[].layers] | max' "$out/plan.json")
  for flags in "none" "full $layers"; do
    read -r p k <<< "$flags"
    if [[ $p == none ]]; then f=(--recompute none); name=none_0
    else f=(--recompute "$p" --recompute-method block --recompute-layers "$k"); name=${p}_$k; fi
    echo "profile_$name $(uptime)" >> "$out/load.txt"
    "$ljperf" benchmark --model "$model" --batch-size "$batch" --seq-len "$seq" --steps 4 \
      --skip-steps 1 --threads "$threads" $compile --precision "$precision" "${f[@]}" --profile --profile-clock cpu \
      --out "$out/runs/$name.jsonl" > "$out/runs/$name.log" 2>&1 ||
      { echo "error: benchmark $name failed, see $out/runs/$name.log" >&2; exit 1; }
  done
fi
echo "end $(uptime)" >> "$out/load.txt"
python3 "$here/time_model_report.py" "$out" "$0 $args" > "$out/TIME_MODEL.md"
cat "$out/TIME_MODEL.md"
echo "plan.json, profiles, logs and TIME_MODEL.md: $out"
