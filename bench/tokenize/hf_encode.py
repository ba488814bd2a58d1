#!/usr/bin/env python3
"""Times HF tokenizers' batch encode on a text file (one document per line), as compare.sh
runs it: prints 'MB/s <rate> ids <count>'. Threads: RAYON_NUM_THREADS. argv[3] = "fast" uses
encode_batch_fast (no offsets: the fastest batch path tokenizers has), else encode_batch."""
import sys
import time

from tokenizers import Tokenizer

tok = Tokenizer.from_file(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    text = f.read()
encode = tok.encode_batch_fast if len(sys.argv) > 3 and sys.argv[3] == "fast" else tok.encode_batch
t0 = time.perf_counter()  # timed like ljperf tokenize: from reading the text to the ids
lines = [l for l in text.split("\n") if l]
ids = 0
batch = 8192
for i in range(0, len(lines), batch):
    ids += sum(len(e.ids) for e in encode(lines[i:i + batch]))
dt = time.perf_counter() - t0
print(f"MB/s {len(text.encode()) / 1e6 / dt:.2f} ids {ids}")
