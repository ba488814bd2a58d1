// Fuzz target: a text corpus as `ljperf tokenize --input` reads it, without the tokenizer:
// LineReader (zlib's gzread, plain or gzipped) cuts lines, each line is checked for UTF-8 and, for
// .jsonl, its "text" string is taken out (extract_json_text), as the pipeline's encode_chunk does.
// Two mode bytes, then the document bytes:
//   byte 0, bit 0: .jsonl (else .txt, one document per line);
//   bit 1: the harness gzips the bytes (so the fuzzer reaches the line logic behind zlib); else
//          the bytes are the file as they are (a gzip magic in them drives zlib's error paths);
//   bit 2: --skip-bad-lines (long lines are dropped, not an error);
//   bit 3: the gzip stream is cut short by (byte 1 >> 2) + 1 bytes (a truncated download): reading
//          must end in an error;
//   bit 4: the gzip stream is two members (a concatenated .gz);
//   bit 5: the name ends in .gz whatever the bytes are;
//   byte 1, bits 0-1: the longest line, 16 B, 4 KiB, 1 MiB or 64 MiB (--max-doc-mb's default).
// A line the reader returns has no '\n' and is no longer than the limit unless marked too long.
#include <unistd.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tokenize/corpus.h"
#include "tokenize/utf8.h"

namespace {

// gzip of `in` (one member), appended to *out; aborts on a zlib failure (a broken harness).
void gzip_append(const uint8_t* in, size_t size, std::vector<uint8_t>* out) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    abort();
  const size_t old = out->size();
  out->resize(old + deflateBound(&z, size) + 64);
  z.next_in = const_cast<Bytef*>(in);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out->data() + old;
  z.avail_out = static_cast<uInt>(out->size() - old);
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
  out->resize(old + z.total_out);
  deflateEnd(&z);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0], param = data[1];
  data += 2, size -= 2;
  const bool jsonl = (mode & 1) != 0, skip_bad = (mode & 4) != 0;
  static const uint64_t kLimits[] = {16, 4 << 10, 1 << 20, 64 << 20};
  const uint64_t max_line = kLimits[param & 3];
  std::string path = lj::fuzz::scratch_dir() + (jsonl ? "/in.jsonl" : "/in.txt");
  if ((mode & 32) != 0) path += ".gz";

  std::vector<uint8_t> file;
  size_t first_member = 0;
  if ((mode & 2) != 0) {
    if ((mode & 16) != 0) {
      gzip_append(data, size / 2, &file);
      first_member = file.size();
      gzip_append(data + size / 2, size - size / 2, &file);
    } else {
      gzip_append(data, size, &file);
    }
    if ((mode & 8) != 0) file.resize(file.size() - std::min<size_t>(file.size(), (param >> 2) + 1));
  } else {
    file.assign(data, data + size);
  }
  lj::fuzz::write_file(path, file.data(), file.size());
  if (lj::tok::input_kind(path) !=
      (jsonl ? lj::tok::InputKind::jsonl : lj::tok::InputKind::text_lines))
    __builtin_trap();

  auto reader = lj::tok::LineReader::open(path, max_line);
  ::unlink(path.c_str());
  if (!reader.ok()) return 0;
  // A gzip stream cut short must be an error, not a corpus that silently ends early; unless fewer
  // than 2 bytes are left (zlib reads them as plain text), or the cut leaves the first of two
  // members whole and at most 1 byte of the second (a whole .gz, then a byte zlib ignores as
  // trailing garbage, as gzip does): nothing can tell those from a complete file.
  const bool cut =
      (mode & 2) != 0 && (mode & 8) != 0 && file.size() >= 2 &&
      (first_member == 0 || file.size() < first_member || file.size() >= first_member + 2);
  std::string line, text;
  uint64_t lines = 0;
  for (;;) {
    bool too_long = false;
    auto more = reader->next(&line, skip_bad, &too_long);
    if (!more.ok()) break;
    if (!*more) {
      if (cut) __builtin_trap();
      break;
    }
    (void)reader->file_offset();
    if (reader->line_number() != ++lines) __builtin_trap();
    if (line.find('\n') != std::string::npos) __builtin_trap();
    if (too_long) {
      if (!skip_bad || !line.empty()) __builtin_trap();
      continue;
    }
    if (line.size() > max_line) __builtin_trap();  // the limit holds for every line returned
    if (size_t bad = 0; !lj::tok::utf8_valid(line, &bad)) {
      if (bad >= line.size()) __builtin_trap();
      continue;
    }
    if (jsonl) (void)lj::tok::extract_json_text(line, "text", &text);
  }
  return 0;
}
