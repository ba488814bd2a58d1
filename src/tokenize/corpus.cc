#include "tokenize/corpus.h"

#include <zlib.h>

#include <nlohmann/json.hpp>

#include "core/json_read.h"

namespace lj::tok {
namespace {

constexpr size_t kReadBytes = 1 << 20;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

InputKind input_kind(const std::string& path) {
  std::string p = path;
  if (ends_with(p, ".gz")) p.resize(p.size() - 3);
  for (const char* ext : {".jsonl", ".json", ".ndjson"})
    if (ends_with(p, ext)) return InputKind::jsonl;
  return InputKind::text_lines;
}

StatusOr<LineReader> LineReader::open(const std::string& path, uint64_t max_line_bytes) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return not_found("cannot open input " + path, "check the --input paths");
  gzbuffer(f, 1 << 18);
  LineReader r;
  r.gz_ = f;
  r.path_ = path;
  r.max_line_bytes_ = max_line_bytes;
  return r;
}

LineReader::LineReader(LineReader&& o) noexcept
    : gz_(o.gz_),
      path_(std::move(o.path_)),
      max_line_bytes_(o.max_line_bytes_),
      buf_(std::move(o.buf_)),
      pos_(o.pos_),
      eof_(o.eof_),
      line_number_(o.line_number_) {
  o.gz_ = nullptr;
}

LineReader::~LineReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

uint64_t LineReader::file_offset() const {
  const auto off = gzoffset(static_cast<gzFile>(gz_));
  return off < 0 ? 0 : static_cast<uint64_t>(off);
}

Status LineReader::fill() {
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  const size_t old = buf_.size();
  buf_.resize(old + kReadBytes);
  const int n = gzread(static_cast<gzFile>(gz_), buf_.data() + old, kReadBytes);
  int code = Z_OK;
  const char* msg = n <= 0 ? gzerror(static_cast<gzFile>(gz_), &code) : nullptr;
  // gzread ends a truncated gzip stream as if it were complete (0, Z_BUF_ERROR "unexpected end of
  // file"): that is an error too, not a corpus that silently ends early.
  if (n < 0 || code != Z_OK) {
    buf_.resize(old);
    // zlib's message starts with the path it was opened with: said once here.
    std::string what = msg ? msg : "zlib error";
    if (what.rfind(path_ + ": ", 0) == 0) what = what.substr(path_.size() + 2);
    return io_error("reading " + path_ + ": " + what,
                    "the file is damaged (a truncated or corrupt .gz?)");
  }
  buf_.resize(old + static_cast<size_t>(n));
  if (n == 0) eof_ = true;
  return ok_status();
}

StatusOr<bool> LineReader::next(std::string* line, bool skip_long, bool* too_long) {
  *too_long = false;
  line->clear();
  size_t scanned = 0;  // bytes after pos_ known to hold no '\n' (fill() keeps them in place)
  const auto long_line = [&] {
    return out_of_range(path_ + ":" + std::to_string(line_number_ + 1) + ": a line longer than " +
                            std::to_string(max_line_bytes_ >> 20) + " MiB",
                        "raise --max-doc-mb, or pass --skip-bad-lines to skip such lines");
  };
  for (;;) {
    const size_t nl = buf_.find('\n', pos_ + scanned);
    if (nl != std::string::npos) {
      // The limit holds for a line whose end is already read, too.
      if (!*too_long && nl - pos_ > max_line_bytes_) {
        if (!skip_long) return long_line();
        *too_long = true;
      }
      ++line_number_;
      if (!*too_long) line->assign(buf_, pos_, nl - pos_);
      pos_ = nl + 1;
      return true;
    }
    if (buf_.size() - pos_ > max_line_bytes_) {
      if (!skip_long) return long_line();
      *too_long = true;  // drop what we have and keep looking for the line's end
      pos_ = buf_.size();
    }
    scanned = buf_.size() - pos_;
    if (eof_) {
      if (pos_ >= buf_.size() && !*too_long) return false;
      ++line_number_;
      if (!*too_long) line->assign(buf_, pos_, buf_.size() - pos_);
      pos_ = buf_.size();
      return true;
    }
    LJ_RETURN_IF_ERROR(fill());
  }
}

Status extract_json_text(std::string_view line, const std::string& key, std::string* text) {
  text->clear();
  bool blank = true;
  for (const char c : line) blank = blank && (c == ' ' || c == '\t' || c == '\r');
  if (blank) return ok_status();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    return invalid_argument("malformed JSON line: " + what,
                            "every line of a .jsonl input must be one JSON object; pass "
                            "--skip-bad-lines to skip bad lines");
  }
  if (!j.is_object())
    return invalid_argument("the JSON line is not an object",
                            "every line of a .jsonl input must be one JSON object");
  const auto it = j.find(key);
  if (it == j.end())
    return invalid_argument("no \"" + key + "\" key in the JSON line",
                            "name the text field with --text-key, or pass --skip-bad-lines");
  const std::string* s = json_string_if(*it);
  if (s == nullptr)
    return invalid_argument("\"" + key + "\" is not a string in the JSON line",
                            "name the text field with --text-key");
  *text = *s;
  return ok_status();
}

}  // namespace lj::tok
