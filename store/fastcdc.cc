#include "store/fastcdc.h"

#include <algorithm>
#include <array>
#include <bit>

namespace agentenv::store {
namespace {

// 256 pseudo-random 64-bit values from splitmix64 with a fixed seed.
constexpr std::array<uint64_t, 256> MakeGear() {
  std::array<uint64_t, 256> g{};
  uint64_t x = 0x6167656e74656e76ULL;  // fixed forever: part of the format
  for (auto& v : g) {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    v = z ^ (z >> 31);
  }
  return g;
}
constexpr std::array<uint64_t, 256> kGear = MakeGear();

// The top `bits` bits: after shifting left once per byte, the high bits of
// the gear hash depend on the last 64 bytes, i.e. that is the window.
constexpr uint64_t TopBits(int bits) { return bits <= 0 ? 0 : ~uint64_t{0} << (64 - bits); }

}  // namespace

FastCdc::FastCdc(const ChunkerParams& p) : p_(p) {
  int bits = std::countr_zero(p.avg_size);
  mask_small_ = TopBits(bits + 2);
  mask_large_ = TopBits(bits - 2);
}

size_t FastCdc::NextCut(const uint8_t* data, size_t n, bool eof) const {
  (void)eof;
  if (n <= p_.min_size) return n;
  size_t end = std::min<size_t>(n, p_.max_size);
  size_t normal = std::min<size_t>(end, p_.avg_size);
  uint64_t fp = 0;
  size_t i = p_.min_size;
  for (; i < normal; ++i) {
    fp = (fp << 1) + kGear[data[i]];
    if (!(fp & mask_small_)) return i + 1;
  }
  for (; i < end; ++i) {
    fp = (fp << 1) + kGear[data[i]];
    if (!(fp & mask_large_)) return i + 1;
  }
  return end;
}

}  // namespace agentenv::store
