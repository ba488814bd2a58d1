# `ljperf ablation` as a user runs it: the table on stdout, results.json / table.md / chart.svg
# under --out, the chart's numbers equal to results.json's, re-rendering with --from, the
# optimizations' environment switches kept out of the base row, and bad input refused.
# Usage: bash ablation_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
# The measured peak is cached per host: keep this test's probe out of the user's cache, and the
# children's temporary folders where the test can see them.
export XDG_CACHE_HOME=$TMP/cache
export TMPDIR=$TMP/tmp
mkdir -p "$TMPDIR"

# --- (a) one round on tiny: the table and the three files ---------------------------------
echo "check: ljperf ablation --model tiny --rounds 1 --steps 3 --out DIR"
rc=0
"$LJ" ablation --model tiny --rounds 1 --steps 3 --seq-len 64 --threads 2 --out out >a.out 2>a.err || rc=$?
[ "$rc" -eq 0 ] || { cat a.err >&2; fail "ablation exited $rc"; }
for f in results.json table.md chart.svg; do
  [ -s "out/$f" ] || fail "out/$f missing or empty"
done
cmp -s a.out out/table.md || fail "stdout and out/table.md differ"
grep -Eq '^\| configuration \| flags \| tokens/s \(median\) \| min–max \| × base \| × previous \|' a.out ||
  { cat a.out >&2; fail "no table header"; }
grep -Eq 'MFU \(of [0-9.]+ GFLOP/s fp32, measured(, the highest of the runs. probes)?\)' a.out || fail "the MFU column does not name its denominator"
for row in '^\| base \| — \| [0-9]+ \| [0-9]+–[0-9]+ \| 1\.00× \|' '^\| \+comm \| — \| n/a \|' \
  '^\| \+compile \| `--compile` \| [0-9]+ \|' '^\| \+compile \+ckpt-opt \| `--compile --ckpt-opt` \| [0-9]+ \|'; do
  grep -Eq "$row" a.out || { cat a.out >&2; fail "no table row matching '$row'"; }
done
grep -Fq -- '- +comm: n/a — world size 1' a.out || fail "the n/a row does not say why"
# One process: the comm columns are n/a, and the notes point at --np.
grep -Eq '^\| base \| .* MiB \| n/a \| n/a \| none \|' a.out || { cat a.out >&2; fail "base: comm columns are not n/a"; }
grep -Fq -- 'ljperf ablation --np N' a.out || fail "the notes do not point at --np N"
pass "table: base, +comm (n/a, world size 1), +compile, +compile +ckpt-opt; $(grep -Eo 'MFU \(of [^)]*\)' a.out)"
# Progress and the files written go to stderr, one line per run when not a terminal.
[ "$(grep -c '^ablation: round 1/1 ' a.err)" -eq 3 ] || { cat a.err >&2; fail "expected 3 run lines on stderr"; }
grep -q '^ablation: wrote ' a.err || fail "no 'wrote' line on stderr"
[ -z "$(ls -A "$TMPDIR")" ] || fail "the children's temporary folder was left in TMPDIR: $(ls "$TMPDIR")"
pass "3 run lines on stderr; no temporary folder left behind"

# --- (b) results.json: every round's raw figures and the medians ---------------------------
echo "check: results.json holds the rounds and the medians"
perl -MJSON::PP -e '
  local $/; open my $f, "<", "out/results.json" or die; my $j = decode_json(<$f>);
  my @rows = @{$j->{rows}};
  die "expected 4 rows, got " . scalar(@rows) . "\n" unless @rows == 4;
  die "rows out of order\n" unless join(",", map { $_->{name} } @rows) eq "base,+comm,+compile,+compile +ckpt-opt";
  die "+comm should be n/a\n" if $rows[1]{available};
  die "+comm gives no reason\n" unless $rows[1]{unavailable_reason} =~ /world size 1/;
  for my $r (@rows[0, 2, 3]) {
    my @runs = @{$r->{runs}};
    die "$r->{name}: expected 1 run\n" unless @runs == 1;
    for my $k (qw(tokens_per_s peak_rss_bytes predicted_peak_rss_bytes)) {
      die "$r->{name}: $k not positive\n" unless $runs[0]{$k} > 0;
    }
    die "$r->{name}: median differs from the one round\n"
      unless $r->{median}{tokens_per_s} == $runs[0]{tokens_per_s}
      && $r->{median}{peak_rss_bytes} == $runs[0]{peak_rss_bytes};
    die "$r->{name}: mfu not positive\n" unless $r->{median}{mfu} > 0;
  }
  die "peak has no measured flops\n" unless $j->{peak}{flops} > 0 && $j->{peak}{describe} =~ /measured/;
  die "model is not tiny\n" unless $j->{model} eq "tiny" && $j->{seq_len} == 64;
' || fail "results.json is not what the ablation measured"
pass "4 rows in order, +comm n/a with its reason, one run each, medians = the round, measured peak named"

# --- (c) chart.svg: self-contained, and its bars say what results.json says ----------------
echo "check: chart.svg's bars, error bars and written values match results.json"
head -c 5 out/chart.svg | grep -q '^<svg ' || fail "chart.svg does not start with <svg"
tail -n 1 out/chart.svg | grep -q '^</svg>$' || fail "chart.svg does not end with </svg>"
if grep -Eq '<script|href=|@import|url\(' out/chart.svg; then fail "chart.svg links or runs something"; fi
if command -v xmllint >/dev/null; then
  xmllint --noout out/chart.svg || fail "chart.svg is not well-formed XML"
fi
perl -MJSON::PP -e '
  local $/; open my $f, "<", "out/results.json" or die; my $j = decode_json(<$f>);
  open my $s, "<", "out/chart.svg" or die; my $svg = <$s>;
  my %bars;  # panel/category -> [value, y, height]
  while ($svg =~ /<rect class="bar" data-panel="(\d)" data-category="([^"]*)" data-value="([^"]*)" x="[^"]*" y="([^"]*)" width="[^"]*" height="([^"]*)"/g) {
    $bars{"$1/$2"} = [$3, $4, $5];
  }
  my %ticks;  # panel -> [[value, y], ...]
  while ($svg =~ /<text class="tick" data-panel="(\d)" data-value="([^"]*)" x="[^"]*" y="([^"]*)"/g) {
    push @{$ticks{$1}}, [$2, $3 - 4];
  }
  my %written;
  while ($svg =~ /<text class="value" data-panel="(\d)" data-category="([^"]*)"[^>]*>([^<]*)</g) { $written{"$1/$2"} = $3 }
  my $mib = 1024 * 1024;
  my $n = 0;
  for my $r (@{$j->{rows}}) {
    next unless $r->{available};
    my $cat = $r->{name};
    for my $p ([0, $r->{median}{tokens_per_s}], [1, $r->{median}{peak_rss_bytes} / $mib]) {
      my ($panel, $want) = @$p;
      my $b = $bars{"$panel/$cat"} or die "no bar for $r->{name} in panel $panel\n";
      my ($t0, $t1) = ($ticks{$panel}[0], $ticks{$panel}[-1]);
      my $top = $t0->[0] + ($b->[1] - $t0->[1]) * ($t1->[0] - $t0->[0]) / ($t1->[1] - $t0->[1]);
      # 0.005 px of coordinate rounding on a 300 px axis: far below 0.5% of the bar.
      abs($top - $want) <= 0.005 * $want + 0.1 or die "$r->{name} panel $panel: bar reads $top, results.json $want\n";
      abs($b->[0] - $want) <= 1e-6 * $want or die "$r->{name} panel $panel: data-value $b->[0] vs $want\n";
      abs($written{"$panel/$cat"} - $want) <= 0.5 or die "$r->{name} panel $panel: written $written{\"$panel/$cat\"} vs $want\n";
      $n++;
    }
  }
  die "expected 6 bars checked, got $n\n" unless $n == 6;
  print "6\n";
' >svg_check.txt 2>&1 || { cat svg_check.txt >&2; fail "chart.svg and results.json disagree"; }
grep -c 'class="unavailable"' out/chart.svg | grep -qx 2 || fail "the n/a row is not marked in both panels"
pass "6 bars (3 rows x tokens/s, peak RSS) read back through the tick labels = results.json medians"

# --- (d) --from re-renders the same table without running anything ------------------------
echo "check: --from out/results.json renders the same table"
"$LJ" ablation --from out/results.json --out out2 >d.out 2>d.err || { cat d.err >&2; fail "--from failed"; }
cmp -s a.out d.out || { diff a.out d.out >&2; fail "--from renders a different table"; }
grep -q '^ablation: round' d.err && fail "--from ran benchmarks"
pass "--from: same table, no run"

# --- (e) LJ_COMPILE / CHECKPOINT_OPTIMIZATION in the shell do not reach base ---------------
echo "check: base stays eager without recompute when LJ_COMPILE=1 CHECKPOINT_OPTIMIZATION=true"
LJ_COMPILE=1 CHECKPOINT_OPTIMIZATION=true "$LJ" ablation --model tiny --rounds 1 --steps 2 --seq-len 32 \
  --threads 2 --keep-logs >e.out 2>e.err || { cat e.err >&2; fail "ablation with the switches exported failed"; }
logs=$(grep -Eo 'records and logs are in [^ ]+' e.err | awk '{print $NF}')
[ -n "$logs" ] && [ -f "$logs/round1_base.log" ] || { cat e.err >&2; fail "--keep-logs did not keep round1_base.log"; }
grep -q '^compile: off' "$logs/round1_base.log" || fail "base ran compiled with LJ_COMPILE=1 exported"
grep -q '^compile: on' "$logs/round1_compile.log" || fail "+compile did not compile"
pass "base log: $(grep '^compile:' "$logs/round1_base.log" | cut -c1-40)"
rm -rf "$logs"

# --- (f) bad input: one error line and a hint, non-zero exit, nothing written --------------
echo "check: bad input is refused with one error line and a hint"
bad() {  # bad NAME EXPECTED-TEXT ARGS...
  local name=$1 want=$2
  shift 2
  local rc=0
  "$LJ" ablation "$@" >bad.out 2>bad.err || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: accepted"
  [ "$rc" -lt 128 ] || fail "$name: crashed (exit $rc)"
  [ "$(grep -c '^error: ' bad.err)" -eq 1 ] || { cat bad.err >&2; fail "$name: expected one error line"; }
  grep -q '^hint: ' bad.err || { cat bad.err >&2; fail "$name: no hint"; }
  grep -Fq -- "$want" bad.err || { cat bad.err >&2; fail "$name: error does not say '$want'"; }
  pass "$name: $(grep '^error: ' bad.err)"
}
bad "--rounds 0" "--rounds must be at least 1" --model tiny --rounds 0
bad "--np 0" "--np must be at least 1" --model tiny --np 0
bad "--compile given" "sets --compile itself" --model tiny --compile
bad "--peer-results missing" "nope.jsonl" --model tiny --peer-results nope.jsonl
bad "child refuses a flag" "ljperf benchmark (base, round 1) failed" --model tiny --steps 0 --out bad_out
[ ! -e bad_out ] || fail "a failed ablation created --out"
bad "--memory-limit nonsense" "memory" --model tiny --memory-limit lots
echo '{"peer": "x", "tokens_per_s": 1}' >p.jsonl
bad "peer line without peak_rss_bytes" "peak_rss_bytes" --from out/results.json --peer-results p.jsonl

e2e_finish
