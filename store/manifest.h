// Manifest objects: the ordered chunk list of a large file.
// Payload: "AEMF", u32 version (1), u64 file size, u64 count, then count
// entries of (32-byte chunk id, u64 chunk size); little-endian.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace agentenv::store {

struct ManifestEntry {
  ObjectId id;
  uint64_t size = 0;
};

std::vector<uint8_t> EncodeManifest(std::span<const ManifestEntry> chunks);
// Errors: kCorrupt when malformed or the sizes do not add up.
Result<std::vector<ManifestEntry>> DecodeManifest(std::span<const uint8_t> payload);

}  // namespace agentenv::store
