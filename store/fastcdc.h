// FastCDC content-defined chunking (Xia et al., USENIX ATC '16) with
// normalized chunking: a stricter mask before the average size and a looser
// one after it pulls chunk sizes towards the average.
//
// The gear table and masks are part of the store format: changing them
// changes chunk boundaries and so loses dedup against existing content.
#pragma once

#include <cstddef>
#include <cstdint>

namespace agentenv::store {

struct ChunkerParams {
  uint32_t min_size = 16 * 1024;
  uint32_t avg_size = 64 * 1024;  // a power of two
  uint32_t max_size = 256 * 1024;
};

class FastCdc {
 public:
  explicit FastCdc(const ChunkerParams& p);
  // Length of the next chunk starting at data[0]. `n` is the bytes
  // available; pass `eof` when no more follow. Needs n >= max_size unless
  // eof. Pure function of the bytes: thread-safe.
  size_t NextCut(const uint8_t* data, size_t n, bool eof) const;
  const ChunkerParams& params() const { return p_; }

 private:
  ChunkerParams p_;
  uint64_t mask_small_;  // used before avg_size: more bits, rarer cuts
  uint64_t mask_large_;  // used after avg_size: fewer bits, likelier cuts
};

}  // namespace agentenv::store
