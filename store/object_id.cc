// ObjectId: SHA-256 ids and their hex form.
//
// SHA-256 through libcrypto's direct digest functions, not EVP: the first
// EVP fetch loads the OpenSSL config, the error strings and the provider
// name map, and registers their teardown at exit, ~1.5 ms of every CLI
// call (a third of a no-op `snap`'s start-up). The direct functions run
// the same code (SHA-NI where the CPU has it) with none of that. They are
// deprecated in OpenSSL 3, not removed.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

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
  // Not the one-shot SHA256(): in OpenSSL 3 that is an EVP fetch.
  SHA256_CTX ctx;
  ::SHA256_Init(&ctx);
  ::SHA256_Update(&ctx, data.data(), data.size());
  ObjectId id;
  ::SHA256_Final(id.bytes.data(), &ctx);
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
