#!/usr/bin/env bash
# Resident bytes of oneDNN's sgemm buffers, one process per shape, for the ISAs oneDNN can be
# limited to on this host (DNNL_MAX_CPU_ISA): the figures tests/unit/sgemm_buffers_test.cc checks
# the planner's model against. Shapes: the validation set's LM heads and layer GEMMs.
#
#   bench/plan/sgemm_trace/sgemm_trace.sh [--threads T] [--isa "ALL AVX2"]
set -euo pipefail
threads=2
isas="ALL AVX2"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --isa) isas=$2; shift 2 ;;
    -h | --help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "sgemm_trace.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)/sgemm_trace
trap 'rm -rf "$(dirname "$bin")"' EXIT
g++ -O1 -std=c++17 -fopenmp "$here/sgemm_trace.cc" -o "$bin" -ldnnl -ldl
shapes=("N T 576 28075 48" "N T 1280 16666 128" "N T 1536 10383 112" "N T 2048 2827 80"
  "N T 768 4881 192" "N T 2048 32000 288" "N T 2048 8000 288" "N T 2048 768 288"
  "N T 1500 9000 64" "N T 3000 20000 96" "N T 4096 640 32" "N N 4096 640 32" "N T 1024 3000 16"
  "N T 384 32000 288" "N T 400 32000 288")
for isa in $isas; do
  echo "== DNNL_MAX_CPU_ISA=$isa, $threads threads"
  for s in "${shapes[@]}"; do
    # shellcheck disable=SC2086
    DNNL_MAX_CPU_ISA=$isa OMP_NUM_THREADS=$threads "$bin" $s
  done
done
