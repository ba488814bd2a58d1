# `ljperf plan --measure` (the autotune of the recompute choices) as a user runs it on the tiny
# preset: every candidate that fits is run in one process, round-robin, and ranked; the text
# lists every candidate once, the JSON holds a valid ranking with every round's times; bad
# inputs exit non-zero with one error line and a hint.
# Usage: bash plan_measure_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
export XDG_CONFIG_HOME="$TMP/xdg"  # the embedded defaults, whatever this user calibrated
args=(--model tiny --device cpu --batch-size 2 --seq-len 64 --exhaustive --threads 1)

"$LJ" plan --help >help.txt || fail "plan --help exited non-zero"
for want in --measure --rounds --warmup-rounds --measure-clock --threads; do
  grep -qF -- "$want" help.txt || fail "plan --help does not mention $want"
done
pass "plan --help lists the --measure options"

"$LJ" plan "${args[@]}" --measure --rounds 6 >m.txt 2>m.err || fail "plan --measure: $(cat m.err)"
# tiny has 2 layers: none, selective 1/2, 2/2, full 1/2, 2/2.
for choice in none "selective 1/2" "selective 2/2" "full 1/2" "full 2/2"; do
  n=$(grep -cE "^ +[0-9]+  $choice " m.txt || true)
  [ "$n" = 1 ] || fail "--measure lists '$choice' $n times: $(cat m.txt)"
done
ranks=$(sed -n '/^measured:/,/^  measured: the median/p' m.txt | grep -oE '^ +[0-9]+  ' | tr -d ' ' | sort -n | tr '\n' ' ')
[ "$ranks" = "1 2 3 4 5 " ] || fail "--measure ranks are not 1..5: '$ranks'"
for want in "5 candidates in one process, round-robin, 6 rounds" "split-half tau" \
  "Kendall tau, predicted against measured" "fastest measured:"; do
  grep -qF -- "$want" m.txt || fail "--measure: no '$want' in: $(cat m.txt)"
done
grep -q "measure: round 7/7 done" m.err || fail "--measure: no progress on stderr: $(cat m.err)"
pass "plan --measure: every candidate listed once, ranks 1..5"

"$LJ" plan "${args[@]}" --measure --rounds 6 --warmup-rounds 0 --measure-clock wall --json \
  >m.json 2>/dev/null || fail "plan --measure --json exited non-zero"
perl -MJSON::PP -e '
  local $/; my $j = decode_json(<STDIN>); my $m = $j->{measured} or die "no measured object\n";
  my @fit = grep { $_->{fits} } @{$j->{candidates}};
  my @c = @{$m->{candidates}};
  die "measured " . scalar(@c) . " of " . scalar(@fit) . " candidates that fit\n" if @c != @fit;
  die "clock $m->{clock}, rounds $m->{rounds}\n" unless $m->{clock} eq "wall" && $m->{rounds} == 6;
  my %seen;
  for my $c (@c) {
    die "$c->{recompute}: rounds\n" unless @{$c->{cpu_seconds}} == 6 && @{$c->{wall_seconds}} == 6;
    for (@{$c->{cpu_seconds}}, @{$c->{wall_seconds}}) { die "$c->{recompute}: time $_\n" unless $_ >= 0 }
    die "$c->{recompute}: no positive median\n" unless $c->{measured_step_seconds} > 0;
    $seen{$c->{rank}}++;
  }
  # The ranking orders the medians of the chosen clock.
  my @by_rank = sort { $a->{rank} <=> $b->{rank} } @c;
  for my $i (1 .. $#by_rank) {
    die "rank $by_rank[$i]{rank} is faster than rank $by_rank[$i-1]{rank}\n"
      if $by_rank[$i]{measured_step_seconds} < $by_rank[$i-1]{measured_step_seconds};
  }
  die "ranks are not 1.." . scalar(@c) . "\n" unless join(",", sort { $a <=> $b } keys %seen) eq join(",", 1 .. @c);
  for my $k (qw(split_half_tau tau)) { die "$k $m->{$k}\n" unless $m->{$k} >= -1 && $m->{$k} <= 1 }
' <m.json || fail "--measure --json: $(head -c 400 m.json)"
pass "plan --measure --json: every candidate that fits, 6 rounds each, a valid ranking"

# Bad inputs: one error line, a hint, non-zero exit.
bad() {
  local what=$1; shift
  if "$LJ" plan "$@" >bad.out 2>bad.err; then fail "$what: exited 0"; fi
  grep -q '^error: ' bad.err || fail "$what: no error line: $(cat bad.err)"
  [ "$(grep -c '^error: ' bad.err)" = 1 ] || fail "$what: more than one error line"
}
bad "--rounds 1" "${args[@]}" --measure --rounds 1
grep -qF -- "--rounds must be at least 2" bad.err || fail "--rounds 1: $(cat bad.err)"
grep -q '^hint: ' bad.err || fail "--rounds 1: no hint"
bad "--rounds without --measure" "${args[@]}" --rounds 4
grep -qF -- "--rounds needs --measure" bad.err || fail "--rounds alone: $(cat bad.err)"
bad "--measure on a GPU" --model tiny --device h100 --measure
grep -qF -- "--measure runs the candidates on this host" bad.err || fail "--measure h100: $(cat bad.err)"
bad "--measure-clock bogus" "${args[@]}" --measure --measure-clock bogus
bad "--measure --warmup-rounds -1" "${args[@]}" --measure --warmup-rounds -1
bad "--measure with a budget nothing fits" "${args[@]}" --measure --memory-limit 1MiB
grep -qF -- "--measure needs at least 2 candidates" bad.err || fail "tiny budget: $(cat bad.err)"
pass "bad --measure inputs: one error line each"
e2e_finish
