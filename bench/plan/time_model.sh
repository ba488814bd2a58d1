#!/usr/bin/env bash
# The planner's time model against measured steps, for every recompute choice.
#
#   bench/plan/time_model.sh [--ljperf build/ljperf] [--out DIR] [--model small] [--batch-size 8]
#                            [--seq-len 256] [--steps 4] [--warmup-steps 1] [--reps 3]
#                            [--threads 1] [--compile] [--no-calibrate]
#
# 1. `ljperf calibrate --device --threads T` remeasures this host's rates (plan/host_rates.h)
#    into the per-host cache, unless --no-calibrate.
# 2. `ljperf plan --device host --exhaustive --json` (OMP_NUM_THREADS=T): the predicted step and
#    its categories for every recompute choice (none, selective and full x block layers 1..L).
# 3. `--reps` rounds, each running every choice once (interleaved: a burst of load hits one
#    round, not one choice): `ljperf benchmark --profile --profile-clock cpu --output`.
#    Measured step: the median step's process CPU time / T (what other processes on the cores
#    do not stretch; wall time on a quiet host), best round. Per category: --profile's rows on
#    the same clock.
# 4. Prints (and writes $out/TIME_MODEL.md) predicted against measured per choice, the error,
#    both rankings, Kendall's tau, the categories of `none` and full recompute of every layer,
#    and `uptime` before each run.
set -euo pipefail
args="$*"

ljperf=build/ljperf
out=$(mktemp -d /tmp/ljperf_time_model.XXXXXX)
model=small batch=8 seq=256 steps=4 warmup=1 reps=3 threads=1 compile="" calibrate=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --seq-len) seq=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warmup=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --compile) compile=--compile; shift ;;
    --no-calibrate) calibrate=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
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
  "$ljperf" calibrate --device --threads "$threads" --out "$out/calibrate.json" > "$out/calibrate.log" 2>&1
  sed -n '/time model rates/,/rates cache/p' "$out/calibrate.log"
fi
"$ljperf" plan --model "$model" --device host --batch-size "$batch" --seq-len "$seq" \
  --exhaustive --json $compile > "$out/plan.json"
mapfile -t choices < <(jq -r '.candidates | sort_by((if .policy == "none" then 0
    elif .policy == "selective" then 1 else 2 end), .layers)[] | "\(.policy) \(.layers)"' \
    "$out/plan.json")
echo "choices: ${#choices[@]}; threads $threads; rounds $reps"
flags_for() {  # policy layers -> benchmark flags
  if [[ $1 == none ]]; then echo "--recompute none"
  else echo "--recompute $1 --recompute-method block --recompute-layers $2"; fi
}
for ((r = 1; r <= reps; r++)); do
  for c in "${choices[@]}"; do
    read -r p k <<< "$c"
    name="r${r}_${p}_${k}"
    echo "$name $(uptime)" >> "$out/load.txt"
    # shellcheck disable=SC2046
    if ! "$ljperf" benchmark --model "$model" --batch-size "$batch" --seq-len "$seq" \
        --steps "$steps" --warmup-steps "$warmup" $compile $(flags_for "$p" "$k") \
        --profile --profile-clock cpu --output "$out/runs/$name.jsonl" > "$out/runs/$name.log" 2>&1; then
      echo "error: $name failed, see $out/runs/$name.log" >&2; tail -3 "$out/runs/$name.log" >&2; exit 1
    fi
    jq -r --arg n "$name" '"\($n): CPU/step \(.summary.step_cpu_s_p50 * 1000 | floor) ms, predicted \(.plan.predicted_step_seconds * 1000 | floor) ms"' "$out/runs/$name.jsonl"
  done
done
python3 "$here/time_model_report.py" "$out" "$threads" "$0 $args" > "$out/TIME_MODEL.md"
cat "$out/TIME_MODEL.md"
echo "records, logs and TIME_MODEL.md: $out"
