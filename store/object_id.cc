// ObjectId: SHA-256 ids and their hex form.
#include <openssl/evp.h>

#include "store/store.h"

namespace agentenv::store {

std::string ObjectId::Hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<ObjectId> ObjectId::FromHex(std::string_view hex) {
  ObjectId id;
  if (hex.size() != 64) {
    return Fail(ErrorCode::kInvalid, std::string(hex) + ": not an object id (need 64 hex digits)");
  }
  for (size_t i = 0; i < 32; ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return Fail(ErrorCode::kInvalid, std::string(hex) + ": not an object id (non-hex digit)");
    }
    id.bytes[i] = uint8_t(hi << 4 | lo);
  }
  return id;
}

ObjectId ObjectId::Of(std::span<const uint8_t> data) {
  // Fetched once: EVP_sha256() makes every digest look the implementation
  // up again in the provider store, under a lock the workers share (a scan
  // hashes a tree per directory).
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  ObjectId id;
  unsigned int len = 0;
  // EVP_Digest only fails on allocation failure, which we treat like new.
  if (!sha256 || EVP_Digest(data.data(), data.size(), id.bytes.data(), &len, sha256, nullptr) != 1) {
    std::abort();
  }
  return id;
}

std::string_view TypeName(ObjectType t) {
  switch (t) {
    case ObjectType::kChunk: return "chunk";
    case ObjectType::kManifest: return "manifest";
    case ObjectType::kTree: return "tree";
    case ObjectType::kNode: return "node";
  }
  return "unknown";
}

}  // namespace agentenv::store
