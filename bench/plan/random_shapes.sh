#!/usr/bin/env bash
# Random Llama shapes for the predictor's validation set (issue 14): writes N config.json files
# and a configuration list for accuracy.sh ("<config.json> <batch> <seq> [flags]"), drawn from a
# fixed seed so that every host validates the same set.
#
#   bench/plan/random_shapes.sh [--seed S] [--count N] --out DIR
#
# Drawn per shape: head_dim {16,32,48,64,128}, heads 1-8, kv heads a divisor of heads, hidden =
# heads * head_dim, layers 1-6, FFN a multiple of 32 in [1.5, 4] x hidden, vocab 512-32000,
# seq {32,64,96,128,192,256,384,512}, batch 1-8, recompute none/selective/full (uniform or
# block), compile on/off. Shapes whose step would be slow on 2 cores (> ~40 GFLOP a step) are
# redrawn, so a run of 3 steps stays within seconds.
set -euo pipefail
seed=14
count=40
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seed) seed=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; echo "hint: see $0 --help" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "error: --out DIR is required" >&2; echo "hint: --out /tmp/shapes" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
awk -v seed="$seed" -v count="$count" -v out="$out" '
function pick(n) { return int(rand() * n) }
BEGIN {
  srand(seed)
  split("16 32 48 64 128", hd_set, " ")
  split("32 64 96 128 192 256 384 512", seq_set, " ")
  made = 0
  while (made < count) {
    hd = hd_set[1 + pick(5)]
    heads = 1 + pick(8)
    nd = 0
    for (d = 1; d <= heads; d++) if (heads % d == 0) divs[++nd] = d
    kv = divs[1 + pick(nd)]
    hidden = heads * hd
    layers = 1 + pick(6)
    ffn = 32 * int((hidden * (1.5 + rand() * 2.5)) / 32 + 0.5)
    if (ffn < 32) ffn = 32
    vocab = 512 + pick(31489)
    seq = seq_set[1 + pick(8)]
    batch = 1 + pick(8)
    tokens = batch * seq
    params = vocab * hidden * 2 + layers * (hidden * hidden * 2 + 2 * hidden * kv * hd + 3 * hidden * ffn)
    if (6 * params * tokens > 4e10) continue
    r = pick(5)
    flags = ""
    if (r == 1) flags = " --recompute selective"
    if (r == 2) flags = " --recompute full"
    if (r == 3 && layers > 1) flags = " --recompute full --recompute-method block --recompute-layers " (1 + pick(layers - 1))
    if (r == 4) flags = " --recompute selective --recompute-layers " (1 + pick(layers))
    if (pick(2) == 1) flags = flags " --compile"
    cfg = sprintf("%s/shape%02d.json", out, made)
    printf "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n" > cfg
    printf "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n", vocab, hidden, layers > cfg
    printf "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n", heads, kv > cfg
    printf "  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n", ffn, 512 > cfg
    printf "  \"rms_norm_eps\": 1e-05,\n  \"rope_theta\": 10000.0,\n  \"hidden_act\": \"silu\",\n" > cfg
    printf "  \"tie_word_embeddings\": false\n}\n" > cfg
    close(cfg)
    printf "%s %d %d%s\n", cfg, batch, seq, flags > (out "/configs.txt")
    made++
  }
}'
echo "$count shapes (seed $seed): $out/configs.txt"
