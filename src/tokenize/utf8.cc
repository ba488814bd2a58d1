#include "tokenize/utf8.h"

namespace lj::tok {

int utf8_sequence_length(std::string_view s, size_t i, size_t* prefix) {
  const auto b = static_cast<unsigned char>(s[i]);
  *prefix = 1;
  if (b < 0x80) return 1;
  int need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return 0;
    const auto c = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return 0;
    *prefix = static_cast<size_t>(k) + 1;
  }
  return need + 1;
}

bool utf8_valid(std::string_view s, size_t* bad_offset) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= s.size()) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t prefix;
    const int n = utf8_sequence_length(s, i, &prefix);
    if (n == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += static_cast<size_t>(n);
  }
  return true;
}

uint32_t next_code_point(std::string_view s, size_t* i) {
  const auto b = static_cast<unsigned char>(s[*i]);
  auto cont = [&](size_t k) {
    return static_cast<uint32_t>(static_cast<unsigned char>(s[*i + k]) & 0x3F);
  };
  uint32_t cp;
  if (b < 0x80) {
    cp = b;
    *i += 1;
  } else if (b < 0xE0) {
    cp = (static_cast<uint32_t>(b & 0x1F) << 6) | cont(1);
    *i += 2;
  } else if (b < 0xF0) {
    cp = (static_cast<uint32_t>(b & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    *i += 3;
  } else {
    cp = (static_cast<uint32_t>(b & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    *i += 4;
  }
  return cp;
}

void append_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t prefix;
    const int n = utf8_sequence_length(s, i, &prefix);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out.append("\xEF\xBF\xBD");
      i += prefix;
    }
  }
  return out;
}

bool is_unicode_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace lj::tok
