#!/usr/bin/env bash
# Throughput of `ljperf tokenize` against HF tokenizers' encode_batch and encode_batch_fast on the
# same text, with the same tokenizer and the same number of threads. The text is the parity
# fixture corpus (newlines in a line replaced by spaces) repeated to SIZE_MB; both sides count MB
# of input text per second. ljperf's time covers reading, encoding and writing the file;
# tokenizers' covers splitting the lines and encoding (not reading the file). They run
# interleaved, twice, because the machine may be shared (the load is printed).
# Usage: bench/tokenize/compare.sh [build/ljperf] [threads] [size_mb]
#   needs: pip install tokenizers==0.23.3
set -euo pipefail
cd "$(dirname "$0")/../.."
LJ=${1:-build/ljperf}
THREADS=${2:-$(nproc)}
SIZE_MB=${3:-16}
FIX=tests/fixtures/tokenize
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 - "$FIX/corpus.jsonl" "$TMP/text.txt" "$SIZE_MB" <<'PY'
import json, sys
lines = [json.loads(l)["text"].replace("\r", " ").replace("\n", " ") for l in open(sys.argv[1])]
lines = [l for l in lines if l]
block = "\n".join(lines) + "\n"
with open(sys.argv[2], "w") as f:
    f.write(block * max(1, int(float(sys.argv[3]) * 1e6 / len(block.encode()))))
PY
echo "text: $(du -m "$TMP/text.txt" | cut -f1) MB, threads $THREADS, load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for tok in llama3 llama2; do
  for round in 1 2; do
    lj=$("$LJ" tokenize --tokenizer "$FIX/$tok.tokenizer.json" --input "$TMP/text.txt" \
      --out "$TMP/out.bin" --threads "$THREADS" 2>/dev/null | perl -ne 'print $1 if /([\d.]+) MB\/s/')
    hf=$(RAYON_NUM_THREADS=$THREADS python3 bench/tokenize/hf_encode.py "$FIX/$tok.tokenizer.json" \
      "$TMP/text.txt" | perl -ne 'print $1 if /MB\/s ([\d.]+)/')
    fast=$(RAYON_NUM_THREADS=$THREADS python3 bench/tokenize/hf_encode.py "$FIX/$tok.tokenizer.json" \
      "$TMP/text.txt" fast | perl -ne 'print $1 if /MB\/s ([\d.]+)/')
    ratio=$(perl -e 'printf "%.2f", $ARGV[0] / $ARGV[1]' "$lj" "$hf")
    ratio_fast=$(perl -e 'printf "%.2f", $ARGV[0] / $ARGV[1]' "$lj" "$fast")
    echo "$tok round $round: ljperf $lj MB/s | tokenizers encode_batch $hf MB/s (${ratio}x)," \
      "encode_batch_fast $fast MB/s (${ratio_fast}x) | load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
