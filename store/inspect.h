// store/inspect: the physical format of pack files, for integrity checks
// (fsck) and index rebuilds. Normal users of the store need store.h only.
//
// A pack file store/packs/<8 digits>.pack is a sequence of records. Each
// record is a 64-byte header followed directly by its payload:
//   0  u32 magic "AEOB"     4 u8 version (1)   5 u8 type   6 u8 codec
//   7  u8 0                 8 u64 size (uncompressed)    16 u64 stored size
//   24 32-byte object id    56 u32 0           60 u32 FNV-1a of bytes 0..59
// all little-endian. Headers start at 8-byte aligned offsets; raw payloads
// of 4 KiB or more start at 4 KiB aligned offsets (so they can be
// reflinked). Gaps between
// records are zero bytes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace agentenv::store {

inline constexpr size_t kRecordHeaderSize = 64;
inline constexpr uint64_t kRawAlign = 4096;

struct RecordHeader {
  ObjectType type = ObjectType::kChunk;
  Codec codec = Codec::kRaw;
  uint64_t size = 0;
  uint64_t stored_size = 0;
  ObjectId id;
};

std::array<uint8_t, kRecordHeaderSize> EncodeRecordHeader(const RecordHeader& h);
// Errors: kCorrupt with the reason (magic, version, check, type, codec).
Result<RecordHeader> ParseRecordHeader(std::span<const uint8_t, kRecordHeaderSize> b);

// "<store_dir>/packs/00000012.pack"
std::string PackPath(const std::string& store_dir, uint32_t pack);

// Per-pack accounting kept in the index. Records stay in a pack until it
// is compacted; dropped ones are counted dead. Live = total - dead.
struct PackInfo {
  uint32_t pack = 0;
  uint64_t committed = 0;      // bytes of the pack that belong to committed batches
  uint64_t objects = 0;        // records in it
  uint64_t stored_bytes = 0;   // sum of payload sizes
  uint64_t logical_bytes = 0;  // sum of uncompressed sizes
  uint64_t dead_objects = 0;   // records whose object was dropped
  uint64_t dead_stored_bytes = 0;  // sum of their payload sizes
  uint64_t dead_logical_bytes = 0;  // sum of their uncompressed sizes
  // Counts one more dead record of this shape.
  void AddDead(const ObjectInfo& o) {
    dead_objects++;
    dead_stored_bytes += o.stored_size;
    dead_logical_bytes += o.size;
  }
};

// The packs table of `s`, by pack number. Errors: I/O.
Result<std::vector<PackInfo>> ListPacks(const Store& s);

// One consistent view of the index for a long check (fsck): the packs
// table, lookups and walks all see the index as of the view's opening (one
// read transaction), whatever other processes commit meanwhile. Its pages
// are read in place, not copied: memory does not grow with the index.
// While a view lives, the index map cannot be grown in this process (a
// writer in it that must, waits), so its owner must not call into the
// store itself until it closes the view, and should not keep it longer
// than the check. Not thread-safe: one thread at a time.
class IndexView {
 public:
  virtual ~IndexView() = default;
  virtual const std::vector<PackInfo>& packs() const = 0;
  // Errors: kCorrupt (bad entry), I/O.
  virtual Result<std::optional<ObjectInfo>> Lookup(const ObjectId& id) const = 0;
  // Every object in id order; stops at fn's first error. fn must not call
  // into the store. Errors: kCorrupt, I/O, fn's.
  virtual Result<void> ForEach(
      const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn) const = 0;
};
// Errors: I/O.
Result<std::unique_ptr<IndexView>> OpenIndexView(const Store& s);

struct LostObject {
  ObjectId id;
  std::string why;
};

struct SalvageResult {
  uint32_t packs_rewritten = 0;
  uint64_t objects_kept = 0;
  std::vector<LostObject> lost;  // dropped from the index: no good copy
};

// Repair primitive (fsck): under the writer lock, copies every indexed
// object that has a verified record in `packs` into a new pack, drops from
// the index the objects indexed there that have none (reported in `lost`),
// recomputes accounting and deletes the packs (missing pack files are
// fine). Errors: I/O.
Result<SalvageResult> SalvagePacks(Store& s, const std::vector<uint32_t>& packs);

// Pack numbers of the files present in <store_dir>/packs (committed or not).
Result<std::vector<uint32_t>> ListPackFiles(const std::string& store_dir);

struct ScannedRecord {
  uint64_t offset = 0;  // of the header
  RecordHeader header;
  std::span<const uint8_t> payload;  // valid during the callback only
};

// The first `length` bytes of a pack file mapped read-only (the kernel's
// page-cache pages, no copy). Holding the pointer keeps the mapping, so
// tasks verifying records on other threads can share it. Thread-safe.
class PackMapping {
 public:
  // Maps [0, length) of `fd` (length may be 0). Errors: I/O.
  static Result<std::shared_ptr<const PackMapping>> Map(int fd, uint64_t length);
  ~PackMapping();
  PackMapping(const PackMapping&) = delete;
  PackMapping& operator=(const PackMapping&) = delete;
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  PackMapping(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

// Like ScanPack with payloads, over a mapping of the pack's committed
// range; payload spans point into `m` and stay valid as long as it does.
// `limit` is the committed length: a mapping shorter than it (the file is
// short) is reported to on_damage. Pages more than `keep_behind` bytes
// behind the scan are unmapped from this process (page cache keeps them;
// a later read of a payload span there faults them back in), so the
// process's RSS holds about keep_behind + 8 MiB of the pack, not all of it.
// Errors: the first error of a callback.
Result<void> ScanPackMapping(const PackMapping& m, uint64_t limit, uint64_t keep_behind,
                             const std::function<Result<void>(const ScannedRecord&)>& on_record,
                             const std::function<Result<void>(uint64_t offset, const std::string& what)>&
                                 on_damage);

// Reads every record of the open pack `fd` in [0, limit) in order,
// sequentially through a large buffer. Damage (bad header, record crossing
// `limit`, short file) goes to on_damage with the offset; the scan then
// resynchronizes at the next valid header. With payloads false, payload
// bytes are skipped (ScannedRecord::payload is empty) and only headers are
// read: fast structure checks. Errors: I/O, or the first error returned by
// a callback.
Result<void> ScanPack(int fd, uint64_t limit,
                      const std::function<Result<void>(const ScannedRecord&)>& on_record,
                      const std::function<Result<void>(uint64_t offset, const std::string& what)>&
                          on_damage,
                      bool payloads = true);

}  // namespace agentenv::store
