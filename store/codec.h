// Payload codecs: zstd, or raw when compression does not pay.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace agentenv::store {

struct Encoded {
  Codec codec = Codec::kRaw;
  std::vector<uint8_t> bytes;  // empty for kRaw: the payload is the input
};

// Compresses `data` at zstd `level` unless a sample shows it is
// incompressible or the result saves under 1/32 of the size; then returns
// kRaw. Thread-safe (per-thread compression contexts).
Encoded Encode(std::span<const uint8_t> data, int level);

// The id of a payload's decoded content, for verification: objects up to
// 1 MiB decode in one call into a per-thread buffer, larger ones in small
// pieces into a cache-sized one (never an allocation of `size` bytes).
// Errors: kCorrupt like Decode. Thread-safe.
Result<ObjectId> HashDecoded(Codec codec, std::span<const uint8_t> payload, uint64_t size);

// Decodes a payload to exactly `size` bytes. Errors: kCorrupt on a bad or
// wrongly sized zstd frame. Thread-safe.
Result<std::vector<uint8_t>> Decode(Codec codec, std::span<const uint8_t> payload, uint64_t size);

}  // namespace agentenv::store
