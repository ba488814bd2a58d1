#!/usr/bin/env bash
# ljperf's ablation next to its PyTorch peers (the transformers class the model's config.json
# names, eager and under torch.compile), on the same model, batch, sequence length, AdamW settings and threads, with the
# runs interleaved round by round so that load drifts hit every row alike; one table and one chart
# (ljperf ablation's renderer) with a ratio column against PyTorch eager.
#
#   bench/peers/compare.sh [--ljperf build/ljperf] [--python .venv-peers/bin/python]
#                          [--rounds 3] [--model small|CONFIG.json] [--out bench/peers/NAME]
#                          [--batch-size N] [--seq-len N] [--threads N] [--steps N]
#                          [--warmup-steps N] [--seed N] [--precision fp32|bf16]
#
# --precision bf16: ljperf's runs take --precision bf16, the peers run under
# torch.autocast("cpu", torch.bfloat16) with f32 weights and AdamW (peer_train.py --precision).
#
# Pinned peers (Python is used only here and in tools/ref/; the product never needs it):
#   torch==2.15.0  transformers==5.23.0  (Python 3.11)
# Install once:
#   python3 -m venv .venv-peers && .venv-peers/bin/pip install torch==2.15.0 transformers==5.23.0
# (PyPI's Linux wheel of torch brings its CUDA libraries, about 3 GiB; it runs on the CPU here.)
#
# Each round: `ljperf ablation --rounds 1` (base, +compile, +compile +ckpt-opt, each its own
# process), then peer_train.py eager, then peer_train.py --compile, each its own process. At the
# end `ljperf ablation --from <the rounds' results.json> --peer-results peers.jsonl --out DIR`
# renders table.md and chart.svg and writes results.json; peers.jsonl is kept beside them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ljperf=build/ljperf
python=.venv-peers/bin/python
rounds=3
model=small
out=""
shape=()  # flags that ljperf benchmark and peer_train.py both take
while [ $# -gt 0 ]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --batch-size|--seq-len|--threads|--steps|--warmup-steps|--seed|--precision)
      shape+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "error: unknown flag $1" >&2
       echo "hint: bench/peers/compare.sh --help lists the flags" >&2; exit 2 ;;
  esac
done
# A name for the model's folders: the preset, or the folder of a config.json path.
case "$model" in
  */config.json) name=$(basename "$(dirname "$model")") ;;
  */*) name=$(basename "$model") ;;
  *) name=$model ;;
esac
out=${out:-bench/peers/$name}
[ -x "$ljperf" ] || { echo "error: $ljperf is not an executable" >&2; echo "hint: build first or pass --ljperf" >&2; exit 1; }
"$python" -c 'import torch, transformers' 2>/dev/null || {
  echo "error: $python cannot import torch and transformers" >&2
  echo "hint: python3 -m venv .venv-peers && .venv-peers/bin/pip install torch==2.15.0 transformers==5.23.0" >&2
  exit 1
}
versions=$("$python" -c 'import torch, transformers; print(torch.__version__.split("+")[0], transformers.__version__)')
[ "$versions" = "2.15.0 5.23.0" ] || echo "warning: peers are torch/transformers $versions, pinned 2.15.0 5.23.0" >&2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# The model: the preset's own config.json and initial weights, for both sides.
"$ljperf" init --model "$model" --out "$work/$name" >/dev/null
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
froms=()
for r in $(seq "$rounds"); do
  echo "== round $r/$rounds: ljperf ablation" >&2
  "$ljperf" ablation --model "$model" --rounds 1 "${shape[@]}" --out "$work/round$r" >/dev/null
  froms+=("$work/round$r/results.json")
  for mode in eager compile; do
    echo "== round $r/$rounds: PyTorch $mode" >&2
    flag=()
    [ "$mode" = compile ] && flag=(--compile)
    "$python" "$here/peer_train.py" --model-dir "$work/$name" --round "$r" "${flag[@]}" "${shape[@]}" \
      >>"$work/peers.jsonl" 2>"$work/peer_$mode.$r.log" ||
      { tail -5 "$work/peer_$mode.$r.log" >&2; echo "error: peer_train.py ($mode, round $r) failed" >&2; exit 1; }
  done
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
mkdir -p "$out"
"$ljperf" ablation --from "${froms[@]}" --peer-results "$work/peers.jsonl" --out "$out"
cp "$work/peers.jsonl" "$out/peers.jsonl"
