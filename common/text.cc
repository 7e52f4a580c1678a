#include "common/text.h"

#include <openssl/evp.h>

#include <cctype>
#include <cstdint>

namespace agentenv {
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

// OpenSSL's EVP block coder: padded RFC 4648 base64 without line breaks.
std::string Base64Encode(std::string_view s) {
  std::string out(4 * ((s.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(s.data()), int(s.size()));
  out.resize(size_t(n));
  return out;
}

std::optional<std::string> Base64Decode(std::string_view s) {
  if (s.size() % 4) return std::nullopt;
  // EVP_DecodeBlock accepts whitespace and counts padding as zero bytes:
  // check the alphabet and the padding here, trim its zeros after.
  size_t pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
    if (c == '=' && i + 2 >= s.size() && s.size() - i <= 2) {
      ++pad;
      continue;
    }
    if (!alpha || pad) return std::nullopt;
  }
  if (pad == 2 && s[s.size() - 1] != '=') return std::nullopt;
  std::string out(s.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(s.data()), int(s.size()));
  if (n < 0) return std::nullopt;
  out.resize(size_t(n) - pad);
  return out;
}

Result<void> CheckName(std::string_view kind, const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64 && name[0] != '.';
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!ok)
    return Fail(ErrorCode::kInvalid, std::string(kind) + " '" + name + "': use 1-64 of A-Z a-z 0-9 . _ - (not starting with '.')");
  return {};
}

}  // namespace agentenv
