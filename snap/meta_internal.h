// Internal to snap/meta*.cc: LMDB helpers shared by the metadata index's
// source files. Not part of snap/'s API.
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "snap/meta.h"
#include "store/store.h"

namespace agentenv::snap::meta_internal {

inline Error MdbError(const std::string& dir, int rc) {
  return Error{dir + ": " + mdb_strerror(rc), rc > 0 ? rc : 0,
               rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ? ErrorCode::kCorrupt : ErrorCode::kIo};
}
#define MDB_TRY(dir, expr)                                       \
  do {                                                           \
    int rc_ = (expr);                                            \
    if (rc_ != 0) return Unexpected<Error>(::agentenv::snap::meta_internal::MdbError(dir, rc_)); \
  } while (0)

inline MDB_val Val(const void* p, size_t n) { return MDB_val{n, const_cast<void*>(p)}; }
inline MDB_val Val(const store::ObjectId& id) { return Val(id.bytes.data(), 32); }
inline store::ObjectId IdOf(const MDB_val& v) {
  store::ObjectId id;
  if (v.mv_size == 32) std::memcpy(id.bytes.data(), v.mv_data, 32);
  return id;
}

// A sequence number as a key that sorts in number order.
inline void BigEndian(uint64_t v, uint8_t out[8]) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = uint8_t(v);
}

inline uint64_t FromBigEndian(const MDB_val& v) {
  uint64_t n = 0;
  const auto* b = static_cast<const uint8_t*>(v.mv_data);
  for (size_t i = 0; i < v.mv_size && i < 8; ++i) n = n << 8 | b[i];
  return n;
}

// The row codecs of the nodes, stat and entries tables (snap/meta.cc). A
// decoder returns nullopt for a row it cannot read, whatever its bytes:
// the index may be damaged (a stat or entry row then is only a cache miss).
std::vector<uint8_t> EncodeRecord(const NodeRecord& r);
std::optional<NodeRecord> DecodeRecord(const store::ObjectId& id, std::span<const uint8_t> b);
std::vector<uint8_t> EncodeStat(const StatEntry& e);
std::optional<StatEntry> DecodeStat(std::span<const uint8_t> b);
std::vector<uint8_t> EncodeEntry(const EntryStat& e);
std::optional<EntryStat> DecodeEntry(std::span<const uint8_t> b);

// A row of the refcount and recount tables is 8 bytes: the count, with the
// top bit set while the object's children are not counted
// (MetaDb::Txn::RefRow::pending). A row of another size reads as 0.
inline constexpr uint64_t kPendingBit = uint64_t{1} << 63;
inline uint64_t RawCount(const MDB_val& v) {
  uint64_t n = 0;
  if (v.mv_size == 8) std::memcpy(&n, v.mv_data, 8);
  return n;
}
inline uint64_t CountOf(const MDB_val& v) { return RawCount(v) & ~kPendingBit; }

// A read transaction closed on scope exit.
struct ReadTxn {
  MDB_txn* txn = nullptr;
  ~ReadTxn() {
    if (txn) mdb_txn_abort(txn);
  }
};

}  // namespace agentenv::snap::meta_internal

#define READ_TXN(t)                \
  meta_internal::ReadTxn t;        \
  MDB_TRY(dir_, mdb_txn_begin(env_, nullptr, MDB_RDONLY, &t.txn))
