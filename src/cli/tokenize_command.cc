// ljperf tokenize: text corpora (.txt / .jsonl, gzipped or not) -> token files that ljperf
// train reads, through an HF tokenizer.json (tokenize/). Progress goes to stderr in MB/s of
// input; the summary to stdout.
#include <fmt/core.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/cli.h"
#include "cli/progress.h"
#include "tokenize/pipeline.h"
#include "tokenize/tokenizer.h"

namespace lj::cli {
namespace {

std::atomic<bool> g_tokenize_stop{false};
extern "C" void on_tokenize_signal(int) {
  g_tokenize_stop.store(true);
}

struct TokenizeArgs {
  std::string tokenizer, out, format = "llmc", text_key = "text";
  std::vector<std::string> inputs;
  double val_fraction = 0;
  bool skip_bad_lines = false;
  int threads = 0;
  int64_t max_doc_mb = 64;
};

Status run_tokenize(const TokenizeArgs& a) {
  tok::CorpusOptions o;
  if (a.format == "llmc") {
    o.format = tok::OutputFormat::llmc;
  } else if (a.format == "megatron") {
    o.format = tok::OutputFormat::megatron;
  } else {
    return invalid_argument("unknown --format '" + a.format + "'", "use llmc or megatron");
  }
  if (a.max_doc_mb <= 0 || a.max_doc_mb > 1024)
    return invalid_argument("--max-doc-mb must be in 1..1024");
  LJ_ASSIGN_OR_RETURN(auto tokenizer, tok::Tokenizer::load(a.tokenizer));
  o.inputs = a.inputs;
  o.out = a.out;
  o.text_key = a.text_key;
  o.val_fraction = a.val_fraction;
  o.skip_bad_lines = a.skip_bad_lines;
  o.max_doc_bytes = static_cast<uint64_t>(a.max_doc_mb) << 20;
  o.threads = a.threads > 0 ? a.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.stop = &g_tokenize_stop;
  Progress progress("tokenize", "MiB");
  o.on_progress = [&](uint64_t done, uint64_t total) {
    // Whole MiB of input on disk; inputs under 1 MiB finish before a line would say anything.
    if (total >= (1u << 20))
      progress.update(static_cast<int64_t>(done >> 20), static_cast<int64_t>(total >> 20));
  };
  struct sigaction sa {};
  sa.sa_handler = on_tokenize_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  // The folder of --out, made when missing (as the help's data/corpus.bin example needs on a
  // fresh checkout) and removed again when the run fails: a failure leaves nothing behind.
  namespace fs = std::filesystem;
  const fs::path out_dir = fs::path(a.out).parent_path();
  std::error_code ec;
  const bool made_dir = !out_dir.empty() && !fs::exists(out_dir, ec);
  // The outermost folder this run creates: removing it removes every one it made.
  fs::path made_top = out_dir;
  while (made_dir && made_top.has_parent_path() && made_top.parent_path() != made_top &&
         !fs::exists(made_top.parent_path(), ec))
    made_top = made_top.parent_path();
  if (made_dir && !fs::create_directories(out_dir, ec)) {
    return io_error("cannot create the folder of --out " + a.out + ": " + ec.message(),
                    "check --out and permissions");
  }
  auto r = tok::tokenize_corpus(*tokenizer, o);
  progress.finish();
  if (!r.ok() && made_dir) fs::remove_all(made_top, ec);
  if (!r.ok()) return r.status();
  const double mb = static_cast<double>(r->text_bytes) / 1e6;
  const char* width = r->wide ? "uint32" : "uint16";
  fmt::print("ljperf tokenize: {} documents, {} tokens ({}) -> {}{}\n", r->documents, r->tokens,
             width, r->paths.train_bin,
             o.format == tok::OutputFormat::megatron ? " + " + r->paths.train_idx : "");
  if (r->wrote_val)
    fmt::print("  validation: {} documents, {} tokens -> {}\n", r->val_documents, r->val_tokens,
               r->paths.val_bin);
  if (r->skipped_lines > 0)
    fmt::print("  skipped {} bad lines (--skip-bad-lines)\n", r->skipped_lines);
  if (r->empty_lines > 0) fmt::print("  {} empty documents left out\n", r->empty_lines);
  fmt::print("  {:.1f} MB of input in {:.2f} s: {:.1f} MB/s on {} threads, vocab {}\n", mb,
             r->seconds, r->seconds > 0 ? mb / r->seconds : 0.0, o.threads,
             tokenizer->vocab_size());
  return ok_status();
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Turn text (.txt, .jsonl, gzipped or not) into token files for ljperf train");
  sub->footer(
      "Example: ljperf tokenize --tokenizer llama3/ --input a.jsonl b.txt.gz --out data/corpus.bin "
      "--val-fraction 0.01\n"
      "Documents: one per line of a .txt, one JSON object per line of a .jsonl (the text under "
      "--text-key); empty ones are left out. Each is encoded as HF tokenizers' encode() does, with "
      "the post-processor's BOS/EOS. Outputs: PATH.bin (llm.c: 1024-byte header, uint16 tokens, or "
      "uint32 when the vocab exceeds 65536; megatron: raw tokens + PATH.idx with one sequence per "
      "document); with --val-fraction, PATH_val.bin too. Files appear only when complete.\n"
      "Supported tokenizer.json parts: BPE (byte-level or SentencePiece-style with byte_fallback), "
      "normalizers Sequence/Prepend/Replace/Strip/NFC/NFD/NFKC/NFKD, pre-tokenizers "
      "Sequence/Split/ByteLevel/"
      "Metaspace, TemplateProcessing, and their decoders (Llama 2, Llama 3, Mistral, Qwen, "
      "GPT-2).");
  sub->add_option("--tokenizer", a->tokenizer, "tokenizer.json, or a folder holding it")
      ->required();
  sub->add_option("--input", a->inputs, "Text files: .txt, .jsonl (also .gz)")->required();
  sub->add_option("--out", a->out, "Output PATH (.bin)")->required();
  sub->add_option("--format", a->format, "llmc or megatron")->capture_default_str();
  sub->add_option("--text-key", a->text_key, "Key of the text in .jsonl lines")
      ->capture_default_str();
  sub->add_option("--val-fraction", a->val_fraction,
                  "Fraction of documents for PATH_val.bin (chosen by a hash of the document's "
                  "index: the same split every run)")
      ->capture_default_str();
  sub->add_flag("--skip-bad-lines", a->skip_bad_lines,
                "Skip and count lines with invalid UTF-8, bad JSON or no text key, instead of "
                "stopping");
  sub->add_option("--threads", a->threads, "Encoding threads (default: all cores)");
  sub->add_option("--max-doc-mb", a->max_doc_mb, "Longest document (line) accepted, in MiB")
      ->capture_default_str();
  return {sub, [a] { return run_tokenize(*a); }};
}

}  // namespace lj::cli
