#!/usr/bin/env bash
# f32 GEMM GFLOP/s of oneDNN (what ljperf uses) against Debian's OpenBLAS and BLIS, at the shapes
# of ljperf's `small` and wide steps, 1 and 2 threads. Each library runs in its own process.
# OpenBLAS and BLIS are optional: `apt-get install libopenblas-dev libblis-dev` to include them.
#
#   bench/speed/blas/blas_libraries.sh [--threads "1 2"]
set -euo pipefail
threads="1 2"
case "${1:-}" in
  --threads) threads=$2 ;;
  --help | -h) sed -n '2,6p' "$0"; exit 0 ;;
  "") ;;
  *) echo "blas_libraries.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)/blas_libraries
trap 'rm -rf "$(dirname "$bin")"' EXIT
g++ -O2 -std=c++17 "$here/blas_libraries.cc" -o "$bin" -ldnnl -ldl
libs=(onednn)
lib_dir=/usr/lib/x86_64-linux-gnu
[ -e $lib_dir/libopenblas.so.0 ] && libs+=($lib_dir/libopenblas.so.0)
[ -e $lib_dir/libblis.so.4 ] && libs+=($lib_dir/libblis.so.4)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $threads; do
  cols=()
  for lib in "${libs[@]}"; do
    out=$(mktemp)
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t BLIS_NUM_THREADS=$t "$bin" "$lib" >"$out"
    cols+=("$out")
  done
  printf '\n%s thread(s), GFLOP/s (best of 7)\n%-24s %17s' "$t" shape "M N K op"
  for lib in "${libs[@]}"; do printf ' %9s' "$(basename "$lib" | sed 's/^lib//; s/\.so.*//')"; done
  echo
  paste -d'|' "${cols[@]}" | awk -F'|' '{
    line = substr($1, 1, 43); for (i = 1; i <= NF; i++) { n = split($i, f, " "); line = line sprintf(" %9s", f[n]) }
    print line }'
  rm -f "${cols[@]}"
done
