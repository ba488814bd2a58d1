#!/usr/bin/env python3
"""Writes the tokenizer-parity fixtures that tests/unit/tokenizer_test.cc compares ljperf against.

Into the output folder (tests/fixtures/tokenize/):
  corpus.jsonl            {"text": ...} per line: varied text made here (several scripts,
                          whitespace runs, numbers, code, emoji, special tokens in text) and
                          lines of the Python standard library's own source and docstrings
  <name>.tokenizer.json   tokenizers trained here on that corpus (no download):
                            llama3      byte-level BPE, Llama 3's split regex, ByteLevel,
                                        ignore_merges, TemplateProcessing <|begin_of_text|> $A
                            gpt2        byte-level BPE with ByteLevel(use_regex) (GPT-2 style),
                                        no post-processor; added tokens with single_word,
                                        rstrip and lstrip
                            llama2      SentencePiece-style BPE: Prepend + Replace normalizer,
                                        byte_fallback, <s> $A, Replace/ByteFallback/Fuse/Strip
                                        decoder (Llama 2's tokenizer.json); one normalized
                                        added token (<sep>)
                            mistral     the same model with a Metaspace pre-tokenizer
                                        (prepend_scheme "first", split false), no normalizer
  <name>.ids.txt          per corpus line (the first 500 for gpt2 and mistral), the ids of tokenizer.encode(text) (post-processor on),
                          space-separated
  variants.jsonl          {"name", "normalizer", "pre_tokenizer", "ids"}: the gpt2 tokenizer with
                          its normalizer and pre-tokenizer replaced (Split behaviors, invert,
                          String patterns, ByteLevel prefix space, Strip, Replace by regex,
                          Metaspace always/split), and the ids for the first 80 lines
  <name>.decode.jsonl     {"line": i, "text": decode(ids)} for the lines where decode(encode(x))
                          is not x itself (skip_special_tokens=True, as decode() does by default)
  unicode.jsonl           {"text": ...} per line: text whose Unicode normalization forms differ
                          (combining marks in and out of canonical order, precomposed and
                          decomposed letters, Hangul jamo, singletons such as U+212B, composition
                          exclusions, compatibility characters such as ligatures, full-width
                          and circled forms)
  qwen2.*                 Qwen2's tokenizer.json layout on llama3's BPE model (no training):
                          NFC normalizer, Qwen2's split regex (single digits), ByteLevel; ids
                          for the first 500 corpus lines, then every unicode.jsonl line
  normalizers.jsonl       {"name", "normalizer", "ids"}: the gpt2 tokenizer with each Unicode
                          normalizer (NFC, NFD, NFKC, NFKD, and NFKC in a Sequence with Strip),
                          ids for every unicode.jsonl line and the first 80 corpus lines

tokenizers' BPE trainer breaks some ties through hash maps, so a rerun may train slightly
different SentencePiece-style vocabularies; the checked-in files are one run's, consistent with
each other.

Regenerate (pinned: Python 3.11, tokenizers 0.23.3):
  pip install tokenizers==0.23.3
  python3 tools/ref/make_tokenizer_fixtures.py tests/fixtures/tokenize
Only the Unicode-normalizer fixtures (unicode.jsonl, qwen2.*, normalizers.jsonl), from the
checked-in llama3 and gpt2 tokenizers, leaving every other file as it is:
  python3 tools/ref/make_tokenizer_fixtures.py tests/fixtures/tokenize --unicode-only
"""
import inspect
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

assert tokenizers.__version__ == "0.23.3", tokenizers.__version__

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
N_LINES = 1800
# gpt2 and mistral share most of their code paths with llama3 and llama2: their ids are kept for
# the first lines only, which keeps the fixtures under 1 MB.
N_LINES_SECONDARY = 500

WORDS = {
    "latin": "the quick brown fox jumps over lazy dog tokenizer training model data loss step "
             "Straße über naïve café résumé coöperate façade jalapeño Ångström déjà-vu".split(),
    "greek": "καλημέρα κόσμε λόγος ἀρχή θάλασσα Ὀδυσσεύς".split(),
    "cyrillic": "привет мир обучение модели данные Ёлка съешь".split(),
    "cjk": "你好 世界 训练 模型 数据 東京 日本語 ひらがな カタカナ 한국어 서울".split(),
    "arabic": "مرحبا بالعالم تعلم الآلة".split(),
    "hebrew": "שלום עולם".split(),
    "indic": "नमस्ते दुनिया தமிழ் বাংলা".split(),
    "thai": "สวัสดีชาวโลก".split(),
    "emoji": "😀 🚀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✨ 🧪 🤖".split(),
}
SPACES = [" ", "  ", "   ", "\t", "\t\t", " \t ", "\u00a0", "\u3000", "\u2003", "\u2028", "\u0085",
          "\u200b", "\r\n", "\n", "\n\n", " \n ", "\r", "\f", "\v"]
SYMBOLS = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["...", "--", "->", "=>", "::", "''", "``", "«»",
                                                         "¿¡", "€", "£", "©", "™", "§", "°", "±", "∑", "√"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "n't"]
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<s>", "</s>", "<unk>",
            "<|start_header_id|>", "<0x41>", "<|begin_of_text", "<s", "< s>", "[INST]", " [INST] ",
            "<sep>", "quick", "xquick", "😀quick", "quick😀", "équick", "quickⅫ", "lazy  ", "  dog"]


def synthetic_line(rng):
    parts = []
    for _ in range(rng.randint(1, 14)):
        kind = rng.random()
        if kind < 0.45:
            script = rng.choice(list(WORDS))
            w = rng.choice(WORDS[script])
            if rng.random() < 0.2:
                w = w.upper() if rng.random() < 0.5 else w.capitalize()
            parts.append(w)
        elif kind < 0.58:
            parts.append(str(rng.choice([0, 7, 42, 123, 1234, 12345, 3.14159, -17, 1e10, 2 ** 40, 10 ** 6 + 1])))
        elif kind < 0.70:
            parts.append(rng.choice(SYMBOLS))
        elif kind < 0.78:
            parts.append(rng.choice(CONTRACTIONS))
        elif kind < 0.86:
            parts.append(rng.choice(SPACES))
        elif kind < 0.90:
            parts.append(rng.choice(SPECIALS))
        elif kind < 0.95:
            parts.append("".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 4))))
        else:
            parts.append(rng.choice(["\u0301", "e\u0301", "\ufeff", "\ufffd", "\u00ad", "𝔘𝔫𝔦", "ﬁ", "Ⅻ", "①"]))
        parts.append(rng.choice(["", " ", " ", " ", "  "]))
    return "".join(parts)


def stdlib_lines():
    import argparse, collections, csv, json as json_mod, textwrap, unittest
    out = []
    for mod in (argparse, collections, csv, json_mod, textwrap, unittest):
        out.extend(l for l in inspect.getsource(mod).split("\n") if l.strip())
    return out


def corpus(rng):
    code = stdlib_lines()
    lines = []
    for i in range(N_LINES):
        r = rng.random()
        if r < 0.55:
            lines.append(synthetic_line(rng))
        elif r < 0.9:
            start = rng.randrange(len(code) - 4)
            lines.append("\n".join(code[start:start + rng.randint(1, 4)]))
        else:
            lines.append(rng.choice(["", " ", "\n", "   leading", "trailing   ", "a" * rng.randint(1, 300),
                                     " " * rng.randint(1, 40), "1" * rng.randint(1, 30),
                                     "x" + "\t" * 7 + "y", "<|begin_of_text|>", "<s>hello</s>"]))
    return lines


def train_bytelevel(lines, split_pre, post, vocab_size, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = split_pre
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer=trainer)
    if post is not None:
        tok.post_processor = post(tok)
    return tok


def train_sentencepiece_style(lines, vocab_size):
    """A BPE model laid out as Llama 2's tokenizer.json: <unk> <s> </s>, then <0x00>..<0xFF>."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=200, show_progress=False)
    tok.train_from_iterator(lines, trainer=trainer)
    j = json.loads(tok.to_str())
    trained = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for t, _ in trained:
        if t not in vocab:
            vocab[t] = len(vocab)
    j["model"]["vocab"] = vocab
    for a in j["added_tokens"]:
        a["id"] = vocab[a["content"]]
    return j


def llama2_json(base):
    j = json.loads(json.dumps(base))
    j["pre_tokenizer"] = None
    j["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return j


def with_normalized_token(j):
    j = json.loads(json.dumps(j))
    j["added_tokens"].append({"id": len(j["model"]["vocab"]), "content": "<sep>", "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": True, "special": False})
    return j


def mistral_json(base):
    j = llama2_json(base)
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    # Mistral's tokenizer.json marks its control tokens special and unnormalized, and adds one
    # normalized, non-special token with lstrip to exercise the other branch.
    j["added_tokens"].append({"id": len(j["model"]["vocab"]), "content": "[INST]", "single_word": False,
                              "lstrip": True, "rstrip": False, "normalized": False, "special": True})
    return j


def write(out, name, tok, lines):
    with open(os.path.join(out, name + ".tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tok.to_str())
    encs = tok.encode_batch(lines)
    decode_diffs = []
    with open(os.path.join(out, name + ".ids.txt"), "w") as f:
        for i, e in enumerate(encs):
            f.write(" ".join(map(str, e.ids)) + "\n")
            d = tok.decode(e.ids)
            if d != lines[i]:
                decode_diffs.append({"line": i, "text": d})
    with open(os.path.join(out, name + ".decode.jsonl"), "w", encoding="utf-8") as f:
        for d in decode_diffs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(f"{name}: vocab {tok.get_vocab_size()}, {sum(len(e.ids) for e in encs)} ids, "
          f"{len(decode_diffs)} lines whose decode differs from the text")


N_LINES_VARIANTS = 80


def variants(out, gpt2, lines):
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    bl_prefix = dict(bl, add_prefix_space=True)
    def split(pattern, behavior, invert=False):
        return {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert}
    seq = lambda *p: {"type": "Sequence", "pretokenizers": list(p)}
    ws = {"Regex": r"\s+"}
    cases = [
        ("removed", None, seq(split(ws, "Removed"), bl)),
        ("merged_with_previous", None, seq(split(ws, "MergedWithPrevious"), bl)),
        ("merged_with_next", None, seq(split(ws, "MergedWithNext"), bl)),
        ("contiguous", None, seq(split({"Regex": r"\p{N}"}, "Contiguous"), bl)),
        ("invert_isolated", None, seq(split({"Regex": r"\p{L}+"}, "Isolated", True), bl)),
        ("string_pattern", None, seq(split({"String": "e"}, "MergedWithNext"), bl)),
        ("prefix_space_gpt2_regex", None, dict(bl, add_prefix_space=True, use_regex=True)),
        ("strip_replace_regex",
         {"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": True, "strip_right": False},
                                               {"type": "Replace", "pattern": {"Regex": r"\d+"}, "content": "#"}]},
         seq(split(ws, "Isolated"), bl_prefix)),
        ("metaspace_always_split", None,
         seq({"type": "Metaspace", "replacement": "_", "prepend_scheme": "always", "split": True}, bl)),
    ]
    base = json.loads(gpt2.to_str())
    with open(os.path.join(out, "variants.jsonl"), "w", encoding="utf-8") as f:
        for name, norm, pre in cases:
            j = dict(base, normalizer=norm, pre_tokenizer=pre)
            tok = Tokenizer.from_str(json.dumps(j))
            ids = [e.ids for e in tok.encode_batch(lines[:N_LINES_VARIANTS])]
            f.write(json.dumps({"name": name, "normalizer": norm, "pre_tokenizer": pre, "ids": ids}) + "\n")


QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Text whose NFC, NFD, NFKC and NFKD forms differ from it or from each other (escapes, so this
# file shows what each line holds).
UNICODE_LINES = [
    "cafe\u0301 au lait, caf\u00e9 au lait",
    "A\u030a and \u00c5 and \u212b (Angstrom sign)",
    "\u2126 ohm sign, \u03a9 omega",
    "a\u0317\u0301 versus a\u0301\u0317 (marks out of canonical order)",
    "\u1100\u1161\u11a8 \uac01 \ud55c\uad6d\uc5b4 \u1112\u1161\u11ab",
    "\u0958 \u0915\u093c (a composition exclusion)",
    "Vi\u1ec7t Nam, Vie\u0323\u0302t Nam, Vi\u00ea\u0323t",
    "\ufb01nancial \ufb02ow, \ufb00ord",
    "\u2460\u2461\u2462 circled, \u00b9\u00b2\u00b3 superscripts, x\u00b2 + y\u00b2",
    "\uff21\uff22\uff23 full-width \uff11\uff12\uff13 and \uff08\uff09",
    "\u3300 \u3231 \u2122 \u2103 \u00bd \u2153",
    "\u1e31\u1e77\u1e53n and k\u0301u\u032dn",
    "\u00c7a va? C\u0327a va. \u0130stanbul I\u0307stanbul",
    "\u0041\u0308\u0304 \u01de \u00c4\u0304",
    "emoji: \U0001f469\u200d\U0001f4bb \u2764\ufe0f \U0001f1fa\U0001f1f8",
    "Greek \u1f00\u0345 \u1f80 \u03b1\u0313\u0345",
    "Arabic \ufefb \u0644\u0627 and \ufdfa",
    "\u00a0non-breaking\u2002en space\u3000ideographic",
    "long s \u017f and \u1e9b\u0323",
    "   leading and trailing \u2003spaces\u2003   ",
]
N_LINES_NORMALIZERS = 80


def unicode_fixtures(out, lines):
    """unicode.jsonl, qwen2.* and normalizers.jsonl from the checked-in llama3 and gpt2 files."""
    with open(os.path.join(out, "unicode.jsonl"), "w", encoding="utf-8") as f:
        for l in UNICODE_LINES:
            f.write(json.dumps({"text": l}, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "llama3.tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    j["normalizer"] = {"type": "NFC"}
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False}
    qwen2 = Tokenizer.from_str(json.dumps(j))
    write(out, "qwen2", qwen2, lines[:N_LINES_SECONDARY] + UNICODE_LINES)
    with open(os.path.join(out, "gpt2.tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    strip = {"type": "Strip", "strip_left": True, "strip_right": True}
    cases = [("nfc", {"type": "NFC"}), ("nfd", {"type": "NFD"}), ("nfkc", {"type": "NFKC"}),
             ("nfkd", {"type": "NFKD"}),
             ("nfkc_strip", {"type": "Sequence", "normalizers": [{"type": "NFKC"}, strip]})]
    texts = UNICODE_LINES + lines[:N_LINES_NORMALIZERS]
    with open(os.path.join(out, "normalizers.jsonl"), "w", encoding="utf-8") as f:
        for name, norm in cases:
            tok = Tokenizer.from_str(json.dumps(dict(base, normalizer=norm)))
            ids = [e.ids for e in tok.encode_batch(texts)]
            f.write(json.dumps({"name": name, "normalizer": norm, "ids": ids}) + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tokenize"
    os.makedirs(out, exist_ok=True)
    if "--unicode-only" in sys.argv[2:]:
        with open(os.path.join(out, "corpus.jsonl"), encoding="utf-8") as f:
            unicode_fixtures(out, [json.loads(l)["text"] for l in f])
        return
    rng = random.Random(17)
    lines = corpus(rng)
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for l in lines:
            f.write(json.dumps({"text": l}, ensure_ascii=False) + "\n")

    llama3_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    bos = lambda t: processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", t.token_to_id("<|begin_of_text|>"))])])
    write(out, "llama3", train_bytelevel(lines, llama3_pre, bos, 3000, True), lines)
    gpt2_pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    gpt2 = train_bytelevel(lines, gpt2_pre, None, 1500, False)
    gpt2.add_tokens([AddedToken("quick", single_word=True), AddedToken("lazy", rstrip=True),
                     AddedToken("dog", lstrip=True, normalized=False)])
    write(out, "gpt2", gpt2, lines[:N_LINES_SECONDARY])
    variants(out, gpt2, lines)

    base = train_sentencepiece_style(lines, 1500)
    write(out, "llama2", Tokenizer.from_str(json.dumps(with_normalized_token(llama2_json(base)))), lines)
    write(out, "mistral", Tokenizer.from_str(json.dumps(mistral_json(base))), lines[:N_LINES_SECONDARY])
    unicode_fixtures(out, lines)


if __name__ == "__main__":
    main()
