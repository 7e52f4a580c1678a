#include "cli/frames.h"

#include <cstdint>

namespace agentenv::cli {
namespace {
constexpr const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

size_t Utf8Prefix(std::string_view s, bool* tail_ok) {
  size_t i = 0;
  *tail_ok = false;
  while (i < s.size()) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    if (n == 0) return i;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range excludes overlongs and surrogates
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    size_t k = 1;
    for (; k < n && i + k < s.size(); ++k) {
      unsigned char b = s[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return i;
    }
    if (k < n) {
      *tail_ok = true;
      return i;
    }
    i += n;
  }
  return i;
}

std::string Base64Encode(std::string_view s) {
  const char* t = kAlphabet;
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(s[i])) << 16 | uint32_t(uint8_t(s[i + 1])) << 8 | uint8_t(s[i + 2]);
    for (int sh : {18, 12, 6, 0}) out += t[(v >> sh) & 63];
  }
  if (i < s.size()) {
    uint32_t v = uint32_t(uint8_t(s[i])) << 16 | (i + 1 < s.size() ? uint32_t(uint8_t(s[i + 1])) << 8 : 0);
    out += t[(v >> 18) & 63];
    out += t[(v >> 12) & 63];
    out += i + 1 < s.size() ? t[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view s) {
  if (s.size() % 4) return std::nullopt;
  int8_t rev[256];
  for (auto& r : rev) r = -1;
  for (int i = 0; i < 64; ++i) rev[uint8_t(kAlphabet[i])] = int8_t(i);
  std::string out;
  out.reserve(s.size() / 4 * 3);
  for (size_t i = 0; i < s.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = s[i + k];
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (pad || rev[uint8_t(c)] < 0) return std::nullopt;
      v = v << 6 | uint32_t(rev[uint8_t(c)]);
    }
    out += char(v >> 16);
    if (pad < 2) out += char(v >> 8 & 0xFF);
    if (pad < 1) out += char(v & 0xFF);
  }
  return out;
}

}  // namespace agentenv::cli
