// The tokenizer a run was trained with travels with it: `train --tokenizer` (or an HF --model
// folder's) is kept in the run's --out folder, and `export` writes it into the HF folder, so
// the exported model loads in transformers with its tokenizer.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace lj::cli {

// The files HF keeps beside a tokenizer, in the order they are copied.
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                                  "special_tokens_map.json"};

// Which of kTokenizerFiles `dir` holds (full paths); empty when it has no tokenizer.json.
std::vector<std::string> tokenizer_files_in(const std::string& dir);

// Copies the tokenizer at `tokenizer` (a tokenizer.json, or a folder holding one) and the
// config files beside it into `out` (which exists). A tokenizer.json already in `out` (a resumed
// run) must be the same file: a different one is refused, since the run's tokens were made
// with the first.
Status keep_tokenizer(const std::string& tokenizer, const std::string& out);

}  // namespace lj::cli
