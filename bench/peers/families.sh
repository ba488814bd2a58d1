#!/usr/bin/env bash
# The open-model families against their PyTorch peers (issue 35's speed check): a small
# Mixtral-shaped mixture of experts (bench/peers/models/mixtral-h256: hidden 256, 8 experts,
# top 2, 4 layers, aux loss on) and qwen3-0.6b's dense layers (bench/peers/models/qwen3-0.6b-4l:
# Qwen3-0.6B's config.json with 4 of its 28 layers), each in fp32 and bf16, through
# bench/peers/compare.sh: ljperf's ablation rows (base, +compile, +compile +ckpt-opt) against
# transformers eager and torch.compile, interleaved round by round. One table per model and
# precision under --out (default bench/peers/families), then one summary line each: ljperf
# compiled tokens/s over torch.compile's (the goal is >= 2x) and over eager's, paired by round.
#
#   bench/peers/families.sh [--rounds 2] [--out DIR] [--batch-size 4] [--seq-len 256]
#                           [--steps 6] [--warmup-steps 2] [--threads N] [--precisions "fp32 bf16"]
#                           [--models "mixtral-h256 qwen3-0.6b-4l"] [compare.sh's other flags]
#
# Take its figures on a quiet host only (load under 1, nothing else running).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=2 out=bench/peers/families precisions="fp32 bf16" models="mixtral-h256 qwen3-0.6b-4l"
batch=4 seq=256 steps=6 warmup=2
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --seq-len) seq=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warmup=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) rest+=("$1"); shift ;;
  esac
done
shape=(--batch-size "$batch" --seq-len "$seq" --steps "$steps" --warmup-steps "$warmup")
for m in $models; do
  [ -f "$here/models/$m/config.json" ] || {
    echo "error: no bench/peers/models/$m/config.json" >&2
    echo "hint: the models are: $(ls "$here/models" | tr '\n' ' ')" >&2
    exit 2
  }
done
summary=()
for m in $models; do
  for p in $precisions; do
    dir=$out/$m-$p
    echo "== $m, $p" >&2
    "$here/compare.sh" --model "$here/models/$m/config.json" --precision "$p" --rounds "$rounds" \
      --out "$dir" "${shape[@]}" "${rest[@]}"
    # ljperf's +compile row against each peer, round by round (paired), then the median (of an
    # even count, the mean of the middle two, as the ablation table's medians; until session 21
    # the lower of them, so 2 rounds printed the worse pair).
    line=$(perl -MJSON::PP -e '
      sub med {
        my @v = sort { $a <=> $b } @_;
        return 0 unless @v;
        return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2;
      }
      my $r = decode_json(do { local $/; open my $f, "<", $ARGV[0] or die; <$f> });
      my %by;  # row name -> round -> tokens/s
      for my $row (@{$r->{rows}}) {
        $by{$row->{name}}{$_->{round} // 0} = $_->{tokens_per_s} for @{$row->{runs} // []};
      }
      my $lj = $by{"+compile"} or die "no +compile row in $ARGV[0]\n";
      my @out = ("ljperf compiled " . sprintf("%.0f", med(values %$lj)) . " tokens/s");
      for my $peer (sort grep { /^PyTorch/ } keys %by) {
        my @ratio = map { $lj->{$_} / $by{$peer}{$_} } grep { exists $lj->{$_} } keys %{$by{$peer}};
        push @out, sprintf("%s %.0f (%.2fx paired)", $peer, med(values %{$by{$peer}}), med(@ratio));
      }
      print join(", ", @out);' "$dir/results.json")
    summary+=("$m $p: $line")
  done
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
