#!/usr/bin/env bash
# The host-side parts of tools/gpu_check.sh's slow phases, measured on this machine with the CPU
# build, from which the phases' time limits are set (issue 32; the figures and the scaling are in
# gpu_check.sh beside each limit).
#   train_cli   tests/cuda/gpu_train_cli_test.sh's runs with --device cpu instead of cuda: the
#               token files, the four processes that run on the GPU there (reference, killed,
#               rerun, resume of the CPU's checkpoint) and the CPU's resume, each timed. The
#               steps then run on the CPU too, so each process's time bounds its host work from
#               above (a step of that 2-layer model is a few milliseconds either way).
#   bench_8b12l the llama3-8b-shaped model (12 layers, 3.67B parameters) at batch 1 x 2048:
#               `ljperf plan --recompute none` (the graph and the memory prediction that
#               `benchmark` makes before its steps), and the host initialisation of the
#               parameters, measured on the same shapes cut to 1 layer (`ljperf init`, from exec
#               to the output folder's creation, at 1 and at every thread here) and scaled to
#               3.67B parameters.
# usage: tools/gpu_host_parts.sh [LJPERF]     (default build/ljperf, a CPU Release build)
#   GPU_HOST_PARTS_ONLY=train_cli stops after train_cli's part (the initialisation takes minutes).
# Prints one line per measurement; needs about 6 GiB of free memory (the 1-layer init).
set -euo pipefail
cd "$(dirname "$0")/.."
lj=$(readlink -f "${1:-build/ljperf}")
[ -x "$lj" ] || { echo "gpu_host_parts: no $lj (build the CPU Release build)" >&2; exit 2; }
tmp=$(mktemp -d -t gpu_host_parts.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
threads=$(nproc)
# shellcheck source=tests/e2e/lib.sh  # make_llmc_tokens, make_llama_config (as the test makes them)
source tests/e2e/lib.sh
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# train_cli, with --device cpu.
t=$(now)
(
  cd "$tmp"
  make_llmc_tokens tok.bin 200000 4096
  make_llmc_tokens val.bin 20000 4096
  make_llama_config cfg.json 4096 64 2 4 2 128 128
)
echo "train_cli: token files and config $(took "$t") s"
common=(train --model "$tmp/cfg.json" --data "$tmp/tok.bin" --val-data "$tmp/val.bin" --val-every 20
  --checkpoint-every 5 --keep-last 2 --batch-size 4 --seq-len 64 --log-every 10 --threads "$threads")
run=("${common[@]}" --steps 200 --device cpu --precision bf16 --compile)
t0=$(now)
t=$(now)
"$lj" "${run[@]}" --out "$tmp/ref" >/dev/null 2>&1
echo "train_cli: reference, 200 steps, 40 checkpoints, 10 evaluations: $(took "$t") s"
t=$(now)
"$lj" "${run[@]}" --out "$tmp/killed" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  [ -e "$tmp/killed/latest" ] && break
  sleep 0.01
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
echo "train_cli: killed run, start to its first checkpoint ($(cat "$tmp/killed/latest")): $(took "$t") s"
t=$(now)
"$lj" "${run[@]}" --out "$tmp/killed" >/dev/null 2>&1
echo "train_cli: rerun to step 200: $(took "$t") s"
mkdir -p "$tmp/oncpu" && cp -r "$tmp/ref/step-195" "$tmp/oncpu/" && echo step-195 >"$tmp/oncpu/latest"
t=$(now)
"$lj" "${common[@]}" --steps 200 --device cpu --precision bf16 --out "$tmp/oncpu" >/dev/null 2>&1
echo "train_cli: the CPU's resume, steps 196-200: $(took "$t") s"
t=$(now)
"$lj" "${common[@]}" --steps 205 --device cpu --precision bf16 --out "$tmp/oncpu" >/dev/null 2>&1
echo "train_cli: resume of that checkpoint, steps 201-205: $(took "$t") s"
echo "train_cli: all of it on $threads threads: $(took "$t0") s"
# What of the reference run is checkpointing (40 checkpoints, model and optimizer, written
# and synced) and what is evaluation (10 passes over val.bin): the same run without each.
t=$(now)
"$lj" "${run[@]}" --checkpoint-every 100000 --out "$tmp/nockpt" >/dev/null 2>&1
echo "train_cli: reference without its 40 checkpoints: $(took "$t") s"
t=$(now)
"$lj" "${run[@]}" --checkpoint-every 100000 --val-every 100000 --out "$tmp/bare" >/dev/null 2>&1
echo "train_cli: reference without checkpoints and evaluations: $(took "$t") s"
if [ "${GPU_HOST_PARTS_ONLY:-}" = train_cli ]; then exit 0; fi

# bench_8b12l: the prediction, then the parameters' initialisation.
cut() {  # cut LAYERS FILE: llama3-8b's shapes with LAYERS layers (gpu_check.sh's config)
  cat >"$2" <<JSON
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
 "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": $1,
 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
 "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
 "tie_word_embeddings": false, "hidden_act": "silu", "initializer_range": 0.02}
JSON
}
cut 12 "$tmp/8b12l.json"
cut 1 "$tmp/8b1l.json"
for mode in "" --compile; do
  t=$(now)
  "$lj" plan --device h200 --model "$tmp/8b12l.json" --precision bf16 --batch-size 1 \
    --seq-len 2048 --recompute none $mode >/dev/null
  echo "bench_8b12l: process start, graph and memory prediction (plan --recompute none ${mode:-eager}): $(took "$t") s"
done
params=$(awk 'BEGIN { v = 128256; h = 4096; f = 14336; kv = 1024
  layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
  printf "%.0f %.0f", 2 * v * h + h + 1 * layer, 2 * v * h + h + 12 * layer }')
p1=${params% *}
p12=${params#* }
for n in 1 "$threads"; do
  rm -rf "$tmp/init"
  t=$(now)
  OMP_NUM_THREADS=$n "$lj" init --model "$tmp/8b1l.json" --out "$tmp/init" >/dev/null 2>&1 &
  pid=$!
  while [ ! -e "$tmp/init" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
  s=$(took "$t")
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  awk -v s="$s" -v n="$n" -v p1="$p1" -v p12="$p12" 'BEGIN {
    printf "bench_8b12l: init of %.2fB parameters on %d thread(s): %.2f s (%.0f M/s per thread); 3.67B: %.1f s at that rate on %d thread(s), %.1f s on 16\n",
      p1 / 1e9, n, s, p1 / s / n / 1e6, s * p12 / p1, n, s * p12 / p1 * n / 16 }'
done
