// Text corpus -> token files, multi-threaded and streaming. One reader thread cuts the inputs
// into chunks of whole documents, worker threads encode chunks (each with its own
// TokenizerSession), and the calling thread writes finished chunks in input order. At most a
// fixed number of chunks is in flight, so memory does not grow with the input. Every document
// is encoded with the post-processor's template (BOS/EOS as the tokenizer defines them).
// Outputs are written atomically (io/atomic_file.h): after an error or an interrupt, nothing is
// left at the output paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenize/token_writer.h"
#include "tokenize/tokenizer.h"

namespace lj::tok {

struct CorpusOptions {
  std::vector<std::string> inputs;
  std::string out;  // see output_paths()
  OutputFormat format = OutputFormat::llmc;
  std::string text_key = "text";
  // Each document goes to the validation file with this probability, decided by a hash of its
  // index in the input (deterministic, independent of the thread count).
  double val_fraction = 0;
  bool skip_bad_lines = false;
  uint64_t max_doc_bytes = 64ull << 20;
  int threads = 1;
  const std::atomic<bool>* stop = nullptr;  // set from a signal handler: abort cleanly
  // Called from the writing thread after each chunk: input bytes read (on disk), their total.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> on_progress;
};

struct CorpusReport {
  OutputPaths paths;
  bool wrote_val = false;
  uint64_t documents = 0, val_documents = 0;
  uint64_t tokens = 0, val_tokens = 0;
  uint64_t skipped_lines = 0;  // bad lines skipped under skip_bad_lines
  uint64_t empty_lines = 0;    // documents with no text (not written)
  uint64_t text_bytes = 0;     // uncompressed bytes read
  bool wide = false;           // uint32 tokens
  double seconds = 0;
};

StatusOr<CorpusReport> tokenize_corpus(const Tokenizer& tokenizer, const CorpusOptions& options);

// The validation split's rule, exposed for tests.
bool is_validation_document(uint64_t document_index, double val_fraction);

}  // namespace lj::tok
