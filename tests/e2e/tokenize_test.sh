# ljperf tokenize as a user runs it: a .jsonl and a gzipped .txt through the Llama-3-style and
# SentencePiece-style fixture tokenizers, into llm.c and Megatron files that ljperf train reads;
# then the bad inputs (invalid UTF-8, malformed JSON, missing key, unsupported component), each
# one "error:" line, non-zero exit, and no output file left behind.
# Usage: bash tokenize_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
FIX="$ROOT/tests/fixtures/tokenize"

# Inputs: the fixture corpus as jsonl (with an extra field) and as a gzipped text file.
perl -ne 'chomp; print "{\"id\": $., \"text\": ", (/^\{"text": (.*)\}$/ ? $1 : "\"\""), "}\n"' \
  "$FIX/corpus.jsonl" >docs.jsonl
perl -MJSON::PP -ne 'my $t = JSON::PP->new->decode($_)->{text}; $t =~ s/[\r\n]+/ /g;
  print "$t\n"' "$FIX/corpus.jsonl" | gzip >docs.txt.gz
n_json=$(grep -c '' docs.jsonl)

"$LJ" tokenize --help >help.txt || fail "--help exited non-zero"
grep -q -- "--val-fraction" help.txt && grep -q -- "--skip-bad-lines" help.txt || fail "--help misses flags"
pass "--help lists the flags"

# llm.c output from both inputs, 10% validation.
"$LJ" tokenize --tokenizer "$FIX/llama3.tokenizer.json" --input docs.jsonl docs.txt.gz \
  --out "$TMP/l3.bin" --val-fraction 0.1 --threads 2 >tok.out 2>tok.err || { cat tok.err >&2; fail "tokenize llmc"; }
[ -s l3.bin ] && [ -s l3_val.bin ] || fail "l3.bin / l3_val.bin missing"
grep -q "MB/s" tok.out || fail "no MB/s in the summary: $(cat tok.out)"
magic=$(perl -e 'read STDIN, $b, 12; my @h = unpack("l<3", $b); print "@h"' <l3.bin)
case "$magic" in 20240520\ 1\ *) ;; *) fail "l3.bin header is '$magic', want magic 20240520 version 1" ;; esac
pass "llm.c shards written ($(head -1 tok.out))"
# The first document's ids are HF's (the fixture's first line, BOS included).
want=$(head -1 "$FIX/llama3.ids.txt")
got=$(perl -e 'read STDIN, $h, 1024; read STDIN, $b, 2 * $ARGV[0]; print join(" ", unpack("S<*", $b))' \
  "$(echo "$want" | wc -w)" <l3.bin)
# The first document may have gone to validation: then it is the first of l3_val.bin.
got_val=$(perl -e 'read STDIN, $h, 1024; read STDIN, $b, 2 * $ARGV[0]; print join(" ", unpack("S<*", $b))' \
  "$(echo "$want" | wc -w)" <l3_val.bin)
[ "$got" = "$want" ] || [ "$got_val" = "$want" ] || fail "first document: got '$got', want '$want'"
pass "first document has HF's ids"

# Deterministic: the same command twice gives the same bytes, whatever the thread count.
"$LJ" tokenize --tokenizer "$FIX/llama3.tokenizer.json" --input docs.jsonl docs.txt.gz \
  --out "$TMP/again.bin" --val-fraction 0.1 --threads 1 >/dev/null 2>&1 || fail "second run"
cmp -s l3.bin again.bin && cmp -s l3_val.bin again_val.bin || fail "outputs differ between 2 and 1 threads"
pass "same bytes on 1 and 2 threads"

# ljperf train reads it: a tiny model with the tokenizer's vocabulary.
vocab=$(perl -ne 'print $1 if /vocab (\d+)/' tok.out)
[ -n "$vocab" ] || fail "no vocab size in the summary: $(cat tok.out)"
make_llama_config cfg3.json "$vocab" 64 2 4 4 128 128
"$LJ" train --model cfg3.json --data l3.bin --val-data l3_val.bin --out "$TMP/run" --steps 2 \
  --batch-size 2 --seq-len 32 --threads 2 >train.out 2>train.err || { cat train.err >&2; fail "train on llmc output"; }
pass "ljperf train ran 2 steps on the llm.c output"

# What the data says, as text: eval --tokenizer decodes the first tokens (BOS first: Llama 3's
# template), and the wrong tokenizer for the data is named.
"$LJ" init --model cfg3.json --out "$TMP/m3" >/dev/null || fail "init"
"$LJ" eval --model "$TMP/m3" --data l3.bin --tokenizer "$FIX/llama3.tokenizer.json" --batch-size 1 \
  --seq-len 16 --val-batches 1 --threads 2 >eval.out 2>eval.err || { cat eval.err >&2; fail "eval --tokenizer"; }
grep -q '^data sample (first 64 tokens, decoded): <|begin_of_text|>' eval.out || { cat eval.out >&2; fail "no decoded sample"; }
pass "eval --tokenizer: $(grep '^data sample' eval.out | cut -c1-100)"
"$LJ" train --model cfg3.json --data l3.bin --val-data l3_val.bin --val-every 1 --out "$TMP/run_s" \
  --steps 1 --batch-size 2 --seq-len 32 --threads 2 --tokenizer "$FIX/llama3.tokenizer.json" \
  >trs.out 2>trs.err || { cat trs.err >&2; fail "train --tokenizer"; }
grep -q '^data sample (first 64 tokens, decoded), train: <|begin_of_text|>' trs.out &&
  grep -q '^data sample (first 64 tokens, decoded), validation: <|begin_of_text|>' trs.out ||
  { cat trs.out >&2; fail "train --tokenizer prints no decoded samples"; }
rc=0
"$LJ" train --model cfg3.json --data l3.bin --out "$TMP/run_w" --steps 1 --batch-size 2 \
  --seq-len 32 --threads 2 --tokenizer "$FIX/gpt2.tokenizer.json" >trw.out 2>trw.err || rc=$?
[ "$rc" -ne 0 ] && grep -q "past the tokenizer's vocabulary" trw.err && [ ! -e "$TMP/run_w" ] ||
  { cat trw.err >&2; fail "the wrong tokenizer for the data is not refused (rc $rc)"; }
pass "train --tokenizer prints the train and validation data as text; a wrong tokenizer is refused before --out is made"

# Megatron output with the SentencePiece-style tokenizer, read back by train.
"$LJ" tokenize --tokenizer "$FIX/llama2.tokenizer.json" --input docs.txt.gz --format megatron \
  --out "$TMP/meg" --threads 2 >meg.out 2>meg.err || { cat meg.err >&2; fail "tokenize megatron"; }
[ -s meg.bin ] && [ -s meg.idx ] || fail "meg.bin / meg.idx missing"
[ "$(head -c 9 meg.idx | tr -d '\0')" = "MMIDIDX" ] || fail "meg.idx has no MMIDIDX magic"
docs=$(perl -e 'read STDIN, $b, 34; my ($v, $c, $s, $d) = unpack("Q< C Q< Q<", substr($b, 9)); print "$s $d"' <meg.idx)
n_txt=$(gzip -dc docs.txt.gz | grep -c '.')
[ "$docs" = "$n_txt $((n_txt + 1))" ] || fail "meg.idx counts '$docs', want '$n_txt $((n_txt + 1))'"
vocab=$(perl -ne 'print $1 if /vocab (\d+)/' meg.out)
make_llama_config cfg2.json "$vocab" 64 2 4 4 128 128
"$LJ" train --model cfg2.json --data meg.bin --out "$TMP/run2" --steps 2 \
  --batch-size 2 --seq-len 32 --threads 2 >train2.out 2>train2.err || { cat train2.err >&2; fail "train on megatron output"; }
pass "Megatron .bin/.idx ($docs sequences/documents) read by ljperf train"

# --- bad inputs: one error line (+ hint), non-zero exit, no output left ---------------------
printf 'fine\nbad \xc3\x28 utf8\n' >bad_utf8.txt
printf '{"text": "ok"}\n{"text": "unterminated\n' >bad_json.jsonl
printf '{"text": "ok"}\n{"body": "no text key"}\n' >no_key.jsonl
perl -pe 's/"type": ?"BPE"/"type": "WordPiece"/' "$FIX/llama3.tokenizer.json" >wordpiece.json
bad_case() {
  local name=$1 mention=$2 rc=0
  shift 2
  rm -f out.bin out_val.bin
  "$LJ" tokenize --out "$TMP/out.bin" --threads 2 "$@" >case.out 2>case.err || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || { cat case.err >&2; fail "$name: exit $rc"; }
  [ "$(grep -c '^error: ' case.err)" -eq 1 ] || { cat case.err >&2; fail "$name: not one error line"; }
  grep -q "^error: .*$mention" case.err || { cat case.err >&2; fail "$name: error does not say '$mention'"; }
  grep -q '^hint: ' case.err || fail "$name: no hint line"
  [ ! -e out.bin ] && [ -z "$(ls | grep 'out\.bin\.tmp' || true)" ] || fail "$name: left an output behind"
  pass "$name: $(grep '^error: ' case.err)"
}
L3=(--tokenizer "$FIX/llama3.tokenizer.json")
bad_case "invalid UTF-8" "bad_utf8.txt:2: invalid UTF-8" "${L3[@]}" --input bad_utf8.txt
bad_case "malformed JSON" "bad_json.jsonl:2: malformed JSON" "${L3[@]}" --input bad_json.jsonl
bad_case "missing text key" 'no_key.jsonl:2: no "text" key' "${L3[@]}" --input no_key.jsonl
bad_case "unsupported component" 'unsupported tokenizer component: model "WordPiece"' \
  --tokenizer wordpiece.json --input bad_utf8.txt
bad_case "missing input" "cannot read input" "${L3[@]}" --input nope.txt

# --skip-bad-lines counts instead of stopping.
"$LJ" tokenize "${L3[@]}" --input bad_utf8.txt no_key.jsonl bad_json.jsonl --out "$TMP/skip.bin" \
  --skip-bad-lines --threads 2 >skip.out 2>skip.err || { cat skip.err >&2; fail "--skip-bad-lines"; }
grep -q "skipped 3 bad lines" skip.out || fail "--skip-bad-lines summary: $(cat skip.out)"
pass "--skip-bad-lines: $(grep skipped skip.out)"
e2e_finish
