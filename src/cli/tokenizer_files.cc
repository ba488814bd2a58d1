#include "cli/tokenizer_files.h"

#include <filesystem>

#include "core/text_file.h"
#include "io/atomic_file.h"
#include "tokenize/tokenizer.h"

namespace lj::cli {
namespace fs = std::filesystem;

std::vector<std::string> tokenizer_files_in(const std::string& dir) {
  std::vector<std::string> files;
  if (!fs::is_regular_file(fs::path(dir) / "tokenizer.json")) return files;
  for (const char* name : kTokenizerFiles) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p)) files.push_back(p.string());
  }
  return files;
}

Status keep_tokenizer(const std::string& tokenizer, const std::string& out) {
  // A folder brings its config files; a file named anything is kept as tokenizer.json, and
  // brings the config files beside it only when it is the folder's own tokenizer.json.
  std::vector<std::string> files;
  if (fs::is_directory(tokenizer)) {
    files = tokenizer_files_in(tokenizer);
    if (files.empty()) {
      return not_found(tokenizer + " holds no tokenizer.json",
                       "give --tokenizer a tokenizer.json or the HF folder holding one");
    }
  } else if (fs::path(tokenizer).filename() == "tokenizer.json") {
    files = tokenizer_files_in(fs::path(tokenizer).parent_path().string().empty()
                                   ? "."
                                   : fs::path(tokenizer).parent_path().string());
  } else {
    files = {tokenizer};
  }
  const std::string kept = (fs::path(out) / "tokenizer.json").string();
  LJ_ASSIGN_OR_RETURN(const std::string given, read_text_file(files.front(), "check --tokenizer",
                                                              tok::kMaxTokenizerFileBytes));
  if (fs::exists(kept)) {
    LJ_ASSIGN_OR_RETURN(const std::string before,
                        read_text_file(kept, "", tok::kMaxTokenizerFileBytes));
    if (before == given) return ok_status();
    return invalid_argument(
        out + " was trained with another tokenizer (its tokenizer.json differs from " +
            files.front() + ")",
        "resume with the tokenizer the run started with, or give a new --out");
  }
  LJ_RETURN_IF_ERROR(copy_file_atomic(files.front(), kept));
  for (size_t i = 1; i < files.size(); ++i) {
    LJ_RETURN_IF_ERROR(
        copy_file_atomic(files[i], (fs::path(out) / fs::path(files[i]).filename()).string()));
  }
  return ok_status();
}

}  // namespace lj::cli
