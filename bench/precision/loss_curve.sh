#!/usr/bin/env bash
# bf16 (and optionally fp16) mixed precision against f32 on real text: `small`, 300 steps, the same
# data, seed and schedule; prints the losses at a few steps, window means and the largest per-step
# difference. Data: tests/fixtures/tokenize/corpus.jsonl tokenized with the fixture Llama 2
# tokenizer by `ljperf tokenize` (52,429 tokens, so 300 steps of 2 x 128 see it about 1.5 times).
# Usage: bench/precision/loss_curve.sh build/ljperf [OUTDIR] [PRECISIONS...]   (default: bf16)
set -euo pipefail
LJ=$(readlink -f "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${2:-/tmp/ljperf-loss-curve}
shift $(($# < 2 ? $# : 2))
PRECISIONS=("${@:-bf16}")
mkdir -p "$OUT" && cd "$OUT"
[ -f corpus.bin ] || "$LJ" tokenize --tokenizer "$ROOT/tests/fixtures/tokenize/llama2.tokenizer.json" \
  --input "$ROOT/tests/fixtures/tokenize/corpus.jsonl" --out corpus.bin >/dev/null
run() {
  rm -rf "run_$1"
  echo "$1: $(uptime)"
  "$LJ" train --model small --data corpus.bin --batch-size 2 --seq-len 128 --steps 300 --threads 1 \
    --precision "$1" --log-every 100 --checkpoint-every 0 --out "run_$1" >"run_$1.out" 2>"run_$1.err"
}
run f32
for p in "${PRECISIONS[@]}"; do run "$p"; done
for p in "${PRECISIONS[@]}"; do
  perl -MJSON::PP -e '
    sub losses { my %l; open my $f, "<", $_[0] or die; while (<$f>) { my $j = decode_json($_);
      $l{$j->{step}} = $j->{loss} if exists $j->{loss} && defined $j->{loss}; } return \%l; }
    my ($p, $a, $b) = ($ARGV[0], losses($ARGV[1]), losses($ARGV[2]));
    printf "%s vs f32\n", $p;
    for my $s (1, 50, 100, 200, 300) { printf "  step %3d: %s %.4f  f32 %.4f  rel %.2e\n", $s, $p,
      $a->{$s}, $b->{$s}, abs($a->{$s} - $b->{$s}) / $b->{$s}; }
    for my $w ([1, 50], [101, 150], [251, 300]) { my ($x, $y) = (0, 0);
      for my $s ($w->[0] .. $w->[1]) { $x += $a->{$s}; $y += $b->{$s}; }
      printf "  mean of steps %d-%d: %s %.4f  f32 %.4f  rel %.2e\n", @$w, $p, $x / 50, $y / 50,
        abs($x - $y) / $y; }
    my $m = 0; for my $s (keys %$b) { my $r = abs($a->{$s} - $b->{$s}) / $b->{$s}; $m = $r if $r > $m; }
    printf "  largest per-step rel difference %.2e\n", $m;' \
    "$p" "run_$p/metrics.jsonl" run_f32/metrics.jsonl
done
