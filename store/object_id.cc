// ObjectId: SHA-256 ids and their hex form (common/sha256.h).
#include "common/sha256.h"
#include "store/store.h"

namespace agentenv::store {

std::string ObjectId::Hex() const { return HexEncode(bytes); }

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
  ObjectId id;
  id.bytes = Sha256::Of(data);
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
