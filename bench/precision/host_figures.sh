#!/usr/bin/env bash
# Issue 36's figures on this host, in one sitting (about 15 minutes on 2 quiet vCPUs), so that a
# session that draws a host class (Intel with AMX, Intel without, AMD Zen 4) spends its time on
# the levers, not on assembling commands. Run it on a quiet host, with nothing else running:
#
#   bench/precision/host_figures.sh [--ljperf build/ljperf] [--python .venv-peers/bin/python]
#                                   [--out DIR] [--skip-peers] [--skip-time-model]
#
# Writes DIR/SUMMARY.md (the figures, each with the command that made it) and every log:
#   1. the host: CPU model, AMX / AVX512_BF16 flags, oneDNN's ISA (`ljperf doctor`), the
#      measured f32 and bf16 peaks (`ljperf calibrate --measure`);
#   2. the bf16 GEMM rate at the step's shapes against the bf16 peak (micro_bench gemm_bf16);
#   3. the wide model (bench/speed/wide, B4 T256) at bf16, compiled, three runs with --profile:
#      tokens/s and MFU of the measured bf16 peak (goals: 25% with AMX, 50% on AVX512_BF16);
#   4. `small` B8 T256 compiled, fp32 against bf16 (bench/speed/ab.sh, 4 rounds): MFU of fp32
#      (Intel goal 70%) and the bf16 / fp32 ratio;
#   5. peak RSS at B32, bf16 against fp32, with the predictions (goals: 0.7x, within 3%);
#   6. unless --skip-peers: bench/peers/compare.sh --precision bf16 on `small` (goal with AMX:
#      2.5x torch.compile under autocast), 2 rounds;
#   7. unless --skip-time-model: bench/plan/time_model.sh --precision bf16 --compile on `small`
#      and the wide model, 6 rounds each (goal: every choice within 10%, tau >= 0.9).
set -euo pipefail
args="$*"
ljperf=build/ljperf python=.venv-peers/bin/python out="" peers=1 tm=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-peers) peers=0; shift ;;
    --skip-time-model) tm=0; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; echo "hint: see $0 --help" >&2; exit 2 ;;
  esac
done
[[ -x "$ljperf" ]] || { echo "error: $ljperf is not an executable" >&2; echo "hint: build first (tools/setup.sh build) or pass --ljperf" >&2; exit 2; }
bench=$(dirname "$ljperf")/micro_bench
[[ -x "$bench" ]] || { echo "error: $bench is missing" >&2; echo "hint: configure with -DLJ_BENCH=ON (the default) and build micro_bench" >&2; exit 2; }
if [[ $peers == 1 && ! -x "$python" ]]; then
  echo "error: $python is missing (the PyTorch peers)" >&2
  echo "hint: python3 -m venv .venv-peers && .venv-peers/bin/pip install torch==2.15.0 transformers==5.23.0, or --skip-peers" >&2
  exit 2
fi
out=${out:-bench/precision/host-$(date +%Y%m%d-%H%M)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
wide=$here/speed/wide/config.json
sum=$out/SUMMARY.md
export OMP_WAIT_POLICY=passive
step() { echo "== $* ($(date +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out/progress.log"; }
field() { grep -m1 -Eo "$1" "$2" | grep -Eo '[0-9.]+' | head -1; }

step "1. host"
{
  echo "# Issue 36's figures on $(hostname), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "ljperf $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?'); \`$0 $args\`"
  echo
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs"
  echo "- flags: $(grep -m1 -o -w -E 'amx_bf16|amx_tile|avx512_bf16|avx512_fp16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
} > "$sum"
grep -m1 -o -w -E 'amx_bf16|amx_tile|avx512_bf16|avx512_fp16' /proc/cpuinfo > /dev/null || echo "- flags: none of amx_bf16, avx512_bf16" >> "$sum"
"$ljperf" doctor > "$out/doctor.log" 2>&1 || true
"$ljperf" calibrate --measure --threads 2 --out "$out/calibrate.json" > "$out/calibrate.log" 2>&1
grep -E 'oneDNN|isa' "$out/doctor.log" | head -2 | sed 's/^ */- doctor: /' >> "$sum"
grep -E 'peak (f32|bf16)' "$out/calibrate.log" | sed 's/^ */- /' >> "$sum"

step "2. GEMM rate at the step's shapes"
OMP_NUM_THREADS=2 "$bench" --benchmark_filter=gemm_bf16 --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true > "$out/gemm_bf16.log" 2>&1
{
  echo
  echo "## bf16 GEMMs at the step's shapes (\`OMP_NUM_THREADS=2 $bench --benchmark_filter=gemm_bf16 --benchmark_repetitions=3\`, medians)"
  echo
  grep median "$out/gemm_bf16.log" | awk '{for (i = 1; i <= NF; ++i) if ($i ~ /^FLOP\/s=/) print "- " $1 ": " substr($i, 8)}'
} >> "$sum"

step "3. the wide model at bf16, compiled"
{
  echo
  echo "## The wide model at bf16, compiled (\`$ljperf benchmark --model $wide --batch-size 4 --seq-len 256 --steps 6 --skip-steps 2 --threads 2 --compile --precision bf16 --profile\`)"
  echo
} >> "$sum"
for i in 1 2 3; do
  log=$out/wide_bf16_$i.log
  "$ljperf" benchmark --model "$wide" --batch-size 4 --seq-len 256 --steps 6 --skip-steps 2 \
    --threads 2 --compile --precision bf16 --profile > "$log" 2>&1
  echo "- run $i: $(field 'tokens/s +[0-9.]+' "$log") tokens/s, MFU $(field 'MFU +[0-9.]+' "$log")% ($(grep -m1 -Eo 'of [0-9.]+ GFLOP/s [a-z0-9]+' "$log")), GEMM-bound MFU $(field 'GEMM-bound MFU [0-9.]+' "$log")%" >> "$sum"
done
grep -m1 'top ops' "$out/wide_bf16_3.log" | sed 's/^ */- run 3, /' >> "$sum"

step "4. small, fp32 against bf16"
"$here/speed/ab.sh" --a "$ljperf" --b "$ljperf" --a-flags "--precision fp32" --b-flags "--precision bf16" \
  --rounds 4 --steps 8 --model small --batch-size 8 --seq-len 256 --threads 2 --compile > "$out/small_ab.log" 2>&1
"$ljperf" benchmark --model small --batch-size 8 --seq-len 256 --steps 10 --skip-steps 2 --threads 2 \
  --compile --precision fp32 > "$out/small_fp32.log" 2>&1
{
  echo
  echo "## \`small\` B8 T256 compiled, fp32 against bf16 (\`bench/speed/ab.sh --a-flags \"--precision fp32\" --b-flags \"--precision bf16\" --rounds 4 --steps 8\`)"
  echo
  grep -E '^(median|paired)' "$out/small_ab.log" | sed 's/^/- /'
  echo "- fp32 alone: $(field 'tokens/s +[0-9.]+' "$out/small_fp32.log") tokens/s, MFU $(field 'MFU +[0-9.]+' "$out/small_fp32.log")% ($(grep -m1 -Eo 'of [0-9.]+ GFLOP/s [a-z0-9]+' "$out/small_fp32.log"))"
} >> "$sum"

step "5. peak RSS at B32"
{
  echo
  echo "## Peak RSS at B32, \`small\` compiled"
  echo
} >> "$sum"
for p in fp32 bf16; do
  log=$out/small_b32_$p.log
  "$ljperf" benchmark --model small --batch-size 32 --seq-len 256 --steps 3 --skip-steps 1 \
    --threads 2 --compile --precision "$p" > "$log" 2>&1
  echo "- $p: $(grep -m1 'process peak RSS' "$log" | sed 's/^ *//')" >> "$sum"
done

if [[ $peers == 1 ]]; then
  step "6. against PyTorch under bf16 autocast"
  "$here/peers/compare.sh" --precision bf16 --rounds 2 --batch-size 8 --seq-len 256 \
    --python "$python" --ljperf "$ljperf" --out "$out/peers-small-b8-bf16" > "$out/peers.log" 2>&1
  {
    echo
    echo "## Against PyTorch under bf16 autocast (\`bench/peers/compare.sh --precision bf16 --rounds 2 --batch-size 8 --seq-len 256\`)"
    echo
    grep -E '^\| (\+compile|base|PyTorch)' "$out/peers-small-b8-bf16/table.md" || true
  } >> "$sum"
fi

if [[ $tm == 1 ]]; then
  step "7. the time model at bf16"
  "$here/plan/time_model.sh" --ljperf "$ljperf" --precision bf16 --compile --rounds 6 \
    --out "$out/time_model_small" > "$out/time_model_small.log" 2>&1
  "$here/plan/time_model.sh" --ljperf "$ljperf" --model "$wide" --batch-size 4 --precision bf16 \
    --compile --rounds 6 --out "$out/time_model_wide" > "$out/time_model_wide.log" 2>&1
  {
    echo
    echo "## Time model at bf16 (\`bench/plan/time_model.sh --precision bf16 --compile --rounds 6\`, \`small\` then the wide model)"
    echo
    for m in small wide; do
      grep -E 'Kendall|\|error\| ≤ 10%|Error:' "$out/time_model_$m/TIME_MODEL.md" | sed "s/^- /- $m: /"
    done
  } >> "$sum"
fi
step "done"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$sum"
cat "$sum"
