#include "common/sha256.h"

namespace agentenv {

std::string HexEncode(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * bytes.size(), '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

Sha256::Digest Sha256::Final() {
  Digest d;
  ::SHA256_Final(d.data(), &ctx_);
  return d;
}

std::string Sha256::OciDigest() { return "sha256:" + HexEncode(Final()); }

Sha256::Digest Sha256::Of(std::span<const uint8_t> data) {
  Sha256 h;
  h.Update(data.data(), data.size());
  return h.Final();
}

std::string Sha256::OciDigestOf(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.OciDigest();
}

}  // namespace agentenv
