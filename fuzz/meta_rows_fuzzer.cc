// The rows of the metadata index (snap/meta.cc): node records, stat cache
// entries, entry cache rows and reference count rows, decoded from any
// bytes as MetaDb reads them from a possibly damaged index. The first
// byte picks the table, the rest is the row. A row a decoder accepts must
// survive its own encoding unchanged, and what it yields must be usable:
// a stat entry's content type is one a tree can hold.
#include <cstdint>
#include <span>

#include "fuzz/fuzz_env.h"
#include "snap/meta_internal.h"

namespace {

using namespace agentenv;
using namespace agentenv::snap::meta_internal;

void NodeRow(std::span<const uint8_t> b) {
  store::ObjectId id;
  id.bytes.fill(0xab);
  auto r = DecodeRecord(id, b);
  if (!r) return;
  std::vector<uint8_t> again = EncodeRecord(*r);
  auto back = DecodeRecord(id, again);
  FUZZ_CHECK(back, "a decoded node record's encoding does not decode");
  FUZZ_CHECK(EncodeRecord(*back) == again, "a node record changed through its encoding");
  FUZZ_CHECK(back->seq == r->seq && back->time_ns == r->time_ns && back->parent == r->parent &&
                 back->tree == r->tree && back->flags == r->flags && back->changes == r->changes &&
                 back->title == r->title && back->damage == r->damage && back->provenance == r->provenance &&
                 back->unknown_sections == r->unknown_sections,
             "a node record's fields changed through its encoding");
}

void StatRow(std::span<const uint8_t> b) {
  auto e = DecodeStat(b);
  if (!e) return;
  FUZZ_CHECK(e->ref.type == store::ObjectType::kChunk || e->ref.type == store::ObjectType::kManifest,
             "a stat cache entry names content of type " + std::to_string(int(e->ref.type)) +
                 ", which no tree entry can hold");
  std::vector<uint8_t> again = EncodeStat(*e);
  auto back = DecodeStat(again);
  FUZZ_CHECK(back, "a decoded stat entry's encoding does not decode");
  FUZZ_CHECK(EncodeStat(*back) == again, "a stat entry changed through its encoding");
}

void EntryRow(std::span<const uint8_t> b) {
  auto e = DecodeEntry(b);
  if (!e) return;
  std::vector<uint8_t> again = EncodeEntry(*e);
  auto back = DecodeEntry(again);
  FUZZ_CHECK(back, "a decoded entry row's encoding does not decode");
  FUZZ_CHECK(EncodeEntry(*back) == again, "an entry row changed through its encoding");
  FUZZ_CHECK(back->tree == e->tree && back->target == e->target, "an entry row's hint changed through its encoding");
}

void CountRow(std::span<const uint8_t> b) {
  MDB_val v = Val(b.data(), b.size());
  uint64_t raw = RawCount(v);
  FUZZ_CHECK(b.size() == 8 || raw == 0, "a count row of " + std::to_string(b.size()) + " bytes read as a count");
  FUZZ_CHECK((CountOf(v) & kPendingBit) == 0, "a count carries the pending bit");
  uint64_t seq = FromBigEndian(v);
  uint8_t key[8];
  BigEndian(seq, key);
  if (b.size() == 8) FUZZ_CHECK(std::memcmp(key, b.data(), 8) == 0, "a sequence key changed through its encoding");
  store::ObjectId id = IdOf(v);
  if (b.size() == 32) FUZZ_CHECK(std::memcmp(id.bytes.data(), b.data(), 32) == 0, "an id row changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::span<const uint8_t> row(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0: NodeRow(row); break;
    case 1: StatRow(row); break;
    case 2: EntryRow(row); break;
    case 3: CountRow(row); break;
  }
  return 0;
}
