#include "tokenize/pipeline.h"

#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/units.h"
#include "tokenize/corpus.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

constexpr size_t kChunkBytes = 1 << 20;
constexpr size_t kChunkDocs = 8192;

struct Chunk {
  uint64_t seq = 0;
  size_t file = 0;
  InputKind kind = InputKind::text_lines;
  uint64_t first_doc = 0;  // index of its first line among all input lines
  std::string text;        // the lines, back to back
  std::vector<uint32_t> line_end;
  std::vector<uint64_t> line_number;  // 1-based, in its file
  std::vector<uint8_t> line_too_long;
  uint64_t input_offset = 0;  // on-disk bytes of all inputs read when the chunk was cut
  // Results.
  std::vector<uint32_t> ids;
  std::vector<uint32_t> doc_tokens;  // per line; 0: nothing to write
  uint64_t skipped = 0, empty = 0;
  Status error;
};

std::string where(const CorpusOptions& o, const Chunk& c, size_t i) {
  return o.inputs[c.file] + ":" + std::to_string(c.line_number[i]);
}

void encode_chunk(const CorpusOptions& o, TokenizerSession& session, Chunk& c) {
  std::string json_text;
  const size_t n = c.line_end.size();
  c.doc_tokens.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = i == 0 ? 0 : c.line_end[i - 1];
    std::string_view line = std::string_view(c.text).substr(b, c.line_end[i] - b);
    Status s;
    if (c.line_too_long[i]) {
      s = out_of_range("a line longer than --max-doc-mb");
    } else if (size_t bad = 0; !utf8_valid(line, &bad)) {
      s = invalid_argument("invalid UTF-8 at byte " + std::to_string(bad),
                           "convert the input to UTF-8 (iconv), or pass --skip-bad-lines to skip "
                           "such lines");
    } else if (c.kind == InputKind::jsonl) {
      s = extract_json_text(line, o.text_key, &json_text);
      line = json_text;
    }
    if (s.ok() && line.empty()) {
      ++c.empty;
      continue;
    }
    const size_t mark = c.ids.size();
    if (s.ok()) s = session.encode(line, true, &c.ids);
    if (!s.ok()) {
      c.ids.resize(mark);
      if (o.skip_bad_lines) {
        ++c.skipped;
        continue;
      }
      c.error = Status(s.code(), where(o, c, i) + ": " + s.message(), s.hint());
      return;
    }
    c.doc_tokens[i] = static_cast<uint32_t>(c.ids.size() - mark);
  }
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The reader, the workers and the writer share this; one mutex guards all of it.
struct Pipeline {
  std::mutex mu;
  std::condition_variable can_read, can_work, can_write;
  std::deque<std::unique_ptr<Chunk>> todo;
  std::map<uint64_t, std::unique_ptr<Chunk>> done;
  size_t in_flight = 0, max_in_flight = 0;
  bool reader_done = false, abort = false;
  uint64_t chunks_made = 0;
  Status reader_status;
};

void read_inputs(const CorpusOptions& o, Pipeline& p, uint64_t* text_bytes) {
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(p.mu);
    p.reader_status = std::move(s);
    p.reader_done = true;
    p.can_write.notify_all();
    p.can_work.notify_all();
  };
  uint64_t doc = 0, seq = 0, offset_before = 0;
  std::string line;
  for (size_t f = 0; f < o.inputs.size(); ++f) {
    auto reader = LineReader::open(o.inputs[f], o.max_doc_bytes);
    if (!reader.ok()) return fail(reader.status());
    const InputKind kind = input_kind(o.inputs[f]);
    struct stat st {};
    const uint64_t file_bytes =
        ::stat(o.inputs[f].c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    bool more = true;
    while (more) {
      auto c = std::make_unique<Chunk>();
      c->file = f, c->kind = kind, c->first_doc = doc;
      while (c->text.size() < kChunkBytes && c->line_end.size() < kChunkDocs) {
        bool too_long = false;
        auto r = reader->next(&line, o.skip_bad_lines, &too_long);
        if (!r.ok()) return fail(r.status());
        if (!*r) {
          more = false;
          break;
        }
        c->text += line;
        *text_bytes += line.size() + 1;
        c->line_end.push_back(static_cast<uint32_t>(c->text.size()));
        c->line_number.push_back(reader->line_number());
        c->line_too_long.push_back(too_long ? 1 : 0);
        ++doc;
      }
      c->input_offset = offset_before + (more ? reader->file_offset() : file_bytes);
      if (c->line_end.empty()) break;
      std::unique_lock<std::mutex> lock(p.mu);
      p.can_read.wait(lock, [&] { return p.abort || p.in_flight < p.max_in_flight; });
      if (p.abort) return;
      c->seq = seq++;
      ++p.in_flight;
      ++p.chunks_made;
      p.todo.push_back(std::move(c));
      p.can_work.notify_one();
    }
    offset_before += file_bytes;
  }
  std::lock_guard<std::mutex> lock(p.mu);
  p.reader_done = true;
  p.can_work.notify_all();
  p.can_write.notify_all();
}

void work(const CorpusOptions& o, const Tokenizer& t, Pipeline& p) {
  TokenizerSession session(t);
  for (;;) {
    std::unique_ptr<Chunk> c;
    {
      std::unique_lock<std::mutex> lock(p.mu);
      p.can_work.wait(lock, [&] { return p.abort || !p.todo.empty() || p.reader_done; });
      if (p.abort || (p.todo.empty() && p.reader_done)) return;
      c = std::move(p.todo.front());
      p.todo.pop_front();
    }
    encode_chunk(o, session, *c);
    std::lock_guard<std::mutex> lock(p.mu);
    const uint64_t seq = c->seq;
    p.done.emplace(seq, std::move(c));
    p.can_write.notify_one();
  }
}

Status write_outputs(const CorpusOptions& o, Pipeline& p, TokenWriter& train, TokenWriter* val,
                     CorpusReport* report) {
  uint64_t total_bytes = 0;
  for (const auto& in : o.inputs) {
    struct stat st {};
    if (::stat(in.c_str(), &st) == 0) total_bytes += static_cast<uint64_t>(st.st_size);
  }
  for (uint64_t next = 0;; ++next) {
    std::unique_ptr<Chunk> c;
    {
      std::unique_lock<std::mutex> lock(p.mu);
      // A signal handler cannot notify: poll the stop flag.
      while (!p.can_write.wait_for(lock, std::chrono::milliseconds(100), [&] {
        return p.done.count(next) > 0 || (p.reader_done && next >= p.chunks_made) ||
               (o.stop != nullptr && o.stop->load());
      })) {
      }
      if (o.stop != nullptr && o.stop->load())
        return Status(StatusCode::internal, "interrupted; no output was written",
                      "run the command again to produce the files");
      if (p.done.count(next) == 0) {
        if (!p.reader_status.ok()) return p.reader_status;
        break;
      }
      c = std::move(p.done[next]);
      p.done.erase(next);
      --p.in_flight;
      p.can_read.notify_one();
    }
    if (!c->error.ok()) return c->error;
    size_t at = 0;
    for (size_t i = 0; i < c->doc_tokens.size(); ++i) {
      const uint32_t n = c->doc_tokens[i];
      if (n == 0) continue;
      const std::span<const uint32_t> ids(c->ids.data() + at, n);
      at += n;
      if (val != nullptr && is_validation_document(c->first_doc + i, o.val_fraction)) {
        LJ_RETURN_IF_ERROR(val->add_document(ids));
      } else {
        LJ_RETURN_IF_ERROR(train.add_document(ids));
      }
    }
    report->skipped_lines += c->skipped;
    report->empty_lines += c->empty;
    if (o.on_progress) o.on_progress(c->input_offset, total_bytes);
  }
  if (train.documents() == 0)
    return invalid_argument("no documents to write: the inputs hold no text",
                            "check --input (and --text-key for .jsonl)");
  LJ_RETURN_IF_ERROR(train.finish());
  if (val != nullptr) LJ_RETURN_IF_ERROR(val->finish());
  return ok_status();
}

}  // namespace

bool is_validation_document(uint64_t document_index, double val_fraction) {
  if (val_fraction <= 0) return false;
  const double u = static_cast<double>(splitmix64(document_index) >> 11) * 0x1.0p-53;
  return u < val_fraction;
}

StatusOr<CorpusReport> tokenize_corpus(const Tokenizer& tokenizer, const CorpusOptions& o) {
  if (o.inputs.empty()) return invalid_argument("no --input files", "pass --input FILE...");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1))
    return invalid_argument("--val-fraction must be in [0, 1)");
  for (const auto& in : o.inputs) {
    struct stat st {};
    if (::stat(in.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return not_found("cannot read input " + in, "check the --input paths");
  }
  CorpusReport report;
  report.paths = output_paths(o.out);
  report.wide = tokenizer.vocab_size() > 65536;
  report.wrote_val = o.val_fraction > 0;
  const double t0 = now_seconds();
  const int threads = std::max(1, o.threads);

  auto run = [&](FileWriter* train_out, FileWriter* val_out) -> Status {
    const bool meg = o.format == OutputFormat::megatron;
    LJ_ASSIGN_OR_RETURN(
        auto train,
        TokenWriter::create(o.format, train_out, meg ? report.paths.train_idx : "", report.wide));
    std::unique_ptr<TokenWriter> val;
    if (val_out != nullptr) {
      LJ_ASSIGN_OR_RETURN(val, TokenWriter::create(o.format, val_out,
                                                   meg ? report.paths.val_idx : "", report.wide));
    }
    Pipeline p;
    p.max_in_flight = static_cast<size_t>(threads) * 3;
    std::thread reader([&] { read_inputs(o, p, &report.text_bytes); });
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) workers.emplace_back([&] { work(o, tokenizer, p); });
    const Status s = write_outputs(o, p, *train, val.get(), &report);
    {
      std::lock_guard<std::mutex> lock(p.mu);
      p.abort = true;
      p.can_read.notify_all();
      p.can_work.notify_all();
    }
    reader.join();
    for (auto& w : workers) w.join();
    report.documents = train->documents();
    report.tokens = train->tokens();
    if (val) report.val_documents = val->documents(), report.val_tokens = val->tokens();
    return s;
  };
  const Status s = write_file_atomic(report.paths.train_bin, [&](FileWriter& train_out) {
    if (!report.wrote_val) return run(&train_out, nullptr);
    return write_file_atomic(report.paths.val_bin,
                             [&](FileWriter& val_out) { return run(&train_out, &val_out); });
  });
  if (!s.ok()) return s;
  report.seconds = now_seconds() - t0;
  return report;
}

}  // namespace lj::tok
