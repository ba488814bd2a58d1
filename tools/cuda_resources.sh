#!/usr/bin/env bash
# Registers, spills and shared memory per flash-attention kernel (backends/cuda/flash_attention.cu)
# without a GPU: ptxas's report (nvcc -Xptxas -v) and the dynamic shared memory each launch asks
# for (flash_attention.h's own formulas, printed by a host build of the header).
#   tools/cuda_resources.sh [ARCH]      (default 90: sm_90)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-90}
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -std=c++20 -O3 -arch="sm_$arch" -I src -Xptxas -v -c src/backends/cuda/flash_attention.cu \
  -o "$tmp/fa.o" 2>"$tmp/ptxas.log"
cat >"$tmp/smem.cc" <<'CC'
#include <cstdio>
#include "backends/cuda/flash_attention.h"
using namespace lj::cuda::flash;
template <class E, int D> void row(const char* e) {
  std::printf("%s %d %d %d %d\n", e, D, forward_smem_bytes<E, D>(), dq_smem_bytes<E, D>(),
              dkv_smem_bytes<E, D>());
}
int main() {
  row<uint16_t, 32>("bf16"); row<uint16_t, 48>("bf16"); row<uint16_t, 64>("bf16");
  row<uint16_t, 128>("bf16"); row<float, 32>("f32"); row<float, 48>("f32");
  row<float, 64>("f32"); row<float, 128>("f32");
}
CC
c++ -std=c++20 -I src "$tmp/smem.cc" -o "$tmp/smem"
"$tmp/smem" >"$tmp/smem.txt"
echo "sm_$arch: kernel, dtype, D, registers, spill stores/loads (bytes), dynamic shared memory"
# ptxas prints per entry: "Compiling entry function 'NAME'", then the spills, then "Used N registers".
awk '/Compiling entry function/ { name = $0; sub(/.*function \x27/, "", name); sub(/\x27.*/, "", name) }
     /spill stores/ { spill = $5 "/" $9 }
     /Used [0-9]+ registers/ { print name, $5, spill }' "$tmp/ptxas.log" |
  while read -r mangled regs spill; do
    pretty=$(echo "$mangled" | c++filt)
    kernel=$(echo "$pretty" | sed -E 's/.*::(flash_[a-z]+_kernel)<.*/\1/')
    dtype=$(echo "$pretty" | grep -q 'unsigned short' && echo bf16 || echo f32)
    d=$(echo "$pretty" | sed -nE 's/.*, ([0-9]+)>.*/\1/p')
    smem=0
    case $kernel in
      flash_forward_kernel) col=3 ;;
      flash_dq_kernel) col=4 ;;
      flash_dkv_kernel) col=5 ;;
      *) col=0 ;;
    esac
    [ "$col" -gt 0 ] && smem=$(awk -v e="$dtype" -v d="$d" -v c="$col" '$1 == e && $2 == d { print $c }' "$tmp/smem.txt")
    printf '%-22s %-5s %4s %4s regs  spills %-7s smem %7s B\n' "$kernel" "$dtype" "${d:--}" \
      "$regs" "$spill" "$smem"
  done | sort
