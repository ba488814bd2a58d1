#!/usr/bin/env bash
# The memory predictor on host configurations it was never fitted on, all reachable from one
# machine: oneDNN limited to AVX2 (DNNL_MAX_CPU_ISA=AVX2: other GEMM kernels, blockings, packing
# buffers and JIT code, as on an AVX2-only CPU such as AMD EPYC Zen 2), one thread instead of
# two (other partitions, per-thread buffers and stacks), and both. Each variant runs
# accuracy.sh over 40 random Llama shapes drawn with a seed no fit has used plus the presets,
# and reports the errors of the shipped coefficients (nothing fitted on the variant) beside
# accuracy.sh's own fit / held-out split. One table per variant in OUT/<variant>/table.md and
# a summary on stdout.
#
#   bench/plan/host_variants.sh [--ljperf build/ljperf] [--seed 15] [--out DIR]
#                               [--variants "native avx2 1thread avx2-1thread"]
set -euo pipefail
ljperf=build/ljperf
seed=15
out=$(mktemp -d /tmp/ljperf_variants.XXXXXX)
variants="native avx2 1thread avx2-1thread"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; echo "hint: see $0 --help" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
ljperf=$(cd "$(dirname "$ljperf")" && pwd)/$(basename "$ljperf")
mkdir -p "$out"
"$here/random_shapes.sh" --seed "$seed" --out "$out/shapes" > /dev/null
for v in $variants; do
  isa=ALL threads=2
  case "$v" in
    native) ;;
    avx2) isa=AVX2 ;;
    1thread) threads=1 ;;
    avx2-1thread) isa=AVX2 threads=1 ;;
    *) echo "error: unknown variant $v" >&2; echo "hint: native avx2 1thread avx2-1thread" >&2; exit 2 ;;
  esac
  # The thread count goes on every configuration line (benchmark --threads), the ISA in the
  # environment of every run.
  sed "s/\$/ --threads $threads/" "$out/shapes/configs.txt" "$here/configs_presets.txt" |
    grep -v '^\s*#' | grep -v '^\s*--threads' > "$out/$v.configs"
  echo "== $v (DNNL_MAX_CPU_ISA=$isa, $threads threads, $(wc -l < "$out/$v.configs") runs)"
  DNNL_MAX_CPU_ISA=$isa "$here/accuracy.sh" --ljperf "$ljperf" --configs "$out/$v.configs" \
    --out "$out/$v" > "$out/$v.log" 2>&1 || { tail -5 "$out/$v.log"; exit 1; }
  grep -E '^\| (held out, random|all, shipped|random shapes, shipped|all \|)' "$out/$v/table.md"
done
echo "tables and logs: $out"
