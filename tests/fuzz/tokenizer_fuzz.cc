// Fuzz target: a tokenizer.json (Tokenizer::load reads the file, then Tokenizer::from_json); an
// accepted tokenizer encodes a few fixed texts (ASCII, UTF-8, digits, special-token look-alikes)
// and decodes what it produced, as `ljperf tokenize` does.
#include <vector>

#include "fuzz_util.h"
#include "json_mutator.h"
#include "tokenize/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = lj::tok::Tokenizer::from_json(lj::fuzz::as_text(data, size), "tokenizer.json");
  if (!t.ok()) return 0;
  lj::tok::TokenizerSession session(**t);
  static const char* const kTexts[] = {
      "Hello world, it's 2024!  New\nlines\t and   spaces.",
      "na\xc3\xafve caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80",
      "cafe\xcc\x81 \xe2\x84\xab \xef\xac\x81 \xe1\x84\x80\xe1\x85\xa1",  // NFC/NFKC changes
      "<|begin_of_text|><s></s><unk>[CLS] 12345678901234567890",
      "",
  };
  for (const char* text : kTexts) {
    std::vector<uint32_t> ids;
    if (!session.encode(text, /*add_special_tokens=*/true, &ids).ok()) continue;
    for (uint32_t id : ids) {
      if (id >= (*t)->vocab_size()) __builtin_trap();
    }
    (void)(*t)->decode(ids, /*skip_special_tokens=*/false);
    (void)(*t)->decode(ids, /*skip_special_tokens=*/true);
  }
  return 0;
}
