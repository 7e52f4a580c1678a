#include "store/manifest.h"

#include <cstring>

#include "store/le.h"

namespace agentenv::store {
namespace {

constexpr uint8_t kMagic[4] = {'A', 'E', 'M', 'F'};
constexpr size_t kHead = 24, kEntry = 40;

}  // namespace

std::vector<uint8_t> EncodeManifest(std::span<const ManifestEntry> chunks) {
  std::vector<uint8_t> b(kHead + kEntry * chunks.size());
  std::memcpy(b.data(), kMagic, 4);
  b[4] = 1;
  uint64_t total = 0;
  uint8_t* p = b.data() + kHead;
  for (const auto& c : chunks) {
    std::memcpy(p, c.id.bytes.data(), 32);
    Put64(p + 32, c.size);
    total += c.size;
    p += kEntry;
  }
  Put64(&b[8], total);
  Put64(&b[16], chunks.size());
  return b;
}

Result<std::vector<ManifestEntry>> DecodeManifest(std::span<const uint8_t> b) {
  if (b.size() < kHead || std::memcmp(b.data(), kMagic, 4) != 0 || b[4] != 1) {
    return Fail(ErrorCode::kCorrupt, "not a manifest");
  }
  uint64_t total = Get64(&b[8]), count = Get64(&b[16]);
  if ((b.size() - kHead) / kEntry != count || (b.size() - kHead) % kEntry != 0) {
    return Fail(ErrorCode::kCorrupt, "manifest has the wrong length");
  }
  std::vector<ManifestEntry> out(count);
  uint64_t sum = 0;
  const uint8_t* p = b.data() + kHead;
  for (auto& e : out) {
    std::memcpy(e.id.bytes.data(), p, 32);
    e.size = Get64(p + 32);
    sum += e.size;
    p += kEntry;
  }
  if (sum != total) return Fail(ErrorCode::kCorrupt, "manifest chunk sizes do not add up");
  return out;
}

}  // namespace agentenv::store
