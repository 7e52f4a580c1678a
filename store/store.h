// store: a content-addressed object store.
//
// Objects are identified by the SHA-256 of their uncompressed bytes, so a
// small file's object id equals `sha256sum` of the file. Each object has a
// type; non-chunk payloads start with their own magic, which keeps the
// types apart. Objects live zstd-compressed (or raw when incompressible) in
// append-only pack files and are indexed in LMDB (see docs/store-format.md).
//
// Concurrency: any number of processes may read while one process writes.
// Readers never wait for the writer. Writers are serialized by a lock file
// (BeginBatch blocks until it gets it). A Store object is thread-safe.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace agentenv::store {

struct ObjectId {
  std::array<uint8_t, 32> bytes{};

  std::string Hex() const;
  // Parses 64 hex digits. Errors: anything else.
  static Result<ObjectId> FromHex(std::string_view hex);
  static ObjectId Of(std::span<const uint8_t> data);  // SHA-256 of data
  auto operator<=>(const ObjectId&) const = default;
};

// For unordered containers of ids: the id is already uniformly random.
struct ObjectIdHash {
  size_t operator()(const ObjectId& id) const {
    size_t h;
    std::memcpy(&h, id.bytes.data(), sizeof h);
    return h;
  }
};

enum class ObjectType : uint8_t {
  kChunk = 1,     // raw file bytes: a whole small file or one CDC chunk
  kManifest = 2,  // a large file: the ordered list of its chunks
  kTree = 3,      // reserved for snap/: a directory
  kNode = 4,      // reserved for snap/: a snapshot node
};
std::string_view TypeName(ObjectType t);

enum class Codec : uint8_t { kRaw = 0, kZstd = 1 };

struct ObjectInfo {
  ObjectType type;
  Codec codec;
  uint64_t size;         // uncompressed bytes
  uint64_t stored_size;  // bytes of the record's payload in the pack
  uint32_t pack;         // pack number
  uint64_t offset;       // offset of the record header in the pack
};

// The content of one file as stored: a chunk (small file) or a manifest.
struct FileRef {
  ObjectId id;
  ObjectType type = ObjectType::kChunk;  // kChunk or kManifest
  uint64_t size = 0;                     // logical file size in bytes
};

struct StoreStats {
  uint64_t objects = 0;
  uint64_t logical_bytes = 0;  // sum of object sizes
  uint64_t stored_bytes = 0;   // sum of stored payload sizes
  uint64_t pack_bytes = 0;     // size of all pack files on disk
  uint32_t packs = 0;
};

class Store;

// A write batch: objects put here become durable and visible at Commit, or
// never (destroyed without Commit, crash, or kill -9) — except that a batch
// growing past ~8k new objects commits them in steps as it goes, so its
// memory stays bounded: objects of steps already committed stay (nothing
// references them; `gc --full` collects them). Drops are committed only by
// Commit. Holds the store's writer lock for its lifetime. Put/PutFile are
// thread-safe and may be called from many threads at once; Commit must be
// called once, alone.
class Batch {
 public:
  virtual ~Batch() = default;
  // Stores bytes as an object of type t (deduplicated). Errors: I/O.
  virtual Result<ObjectId> Put(ObjectType t, std::span<const uint8_t> data) = 0;
  // Put, also setting *was_stored: whether the store had the object before
  // this batch (or a step of it) put it, so that it is readable from the
  // store now. One index lookup, where Put and then Store::Has take two.
  virtual Result<ObjectId> Put(ObjectType t, std::span<const uint8_t> data, bool* was_stored) = 0;
  // Stores the rest of the stream `fd` (read to EOF) as one file: one chunk
  // when small, else FastCDC chunks plus a manifest. Memory is bounded for
  // any size. `path` is used in error messages only. Errors: read or I/O.
  virtual Result<FileRef> PutFile(int fd, std::string_view path) = 0;
  // Makes everything put so far durable and visible: one fsync of each pack
  // written since the last step, then one LMDB commit (with the drops), then
  // releases the writer lock (the batch accepts no more puts). Errors: I/O;
  // the batch is then absent (committed steps stay).
  virtual Result<void> Commit() = 0;
  // Number of bytes of new (not deduplicated) objects so far.
  virtual uint64_t new_bytes() const = 0;
  // The bytes of an object this batch wrote (its Put has returned) and has
  // not committed yet, verified against its id: content a caller must read
  // before the commit (snap/'s package deltas, computed for the node that
  // joins this batch), which Store::Get cannot see yet. Objects the store
  // had already, and those a step of this batch committed, are read from
  // the Store. Thread-safe like Put. Errors: kNotFound when the batch holds
  // no such pending object (always for a hashing batch, and after Commit);
  // kCorrupt, I/O.
  virtual Result<std::vector<uint8_t>> GetPending(const ObjectId& id) const = 0;
  // Removes the object `id` from the store at Commit, atomically with the
  // batch's puts; its record becomes dead space in its pack (counted in the
  // pack's dead accounting) until Compact reclaims it. No-op for an id the
  // store does not have. A later Put of the same id in this batch cancels
  // the drop. The caller (snap/ refcounting) guarantees nothing live still
  // references the id: the store does not check. Thread-safe like Put.
  // Errors: I/O reading the index.
  virtual Result<void> Drop(const ObjectId& id) = 0;
};

struct CompactOptions {
  // Rewrite packs whose dead stored bytes are at least this fraction of
  // their stored bytes. Packs with no live record are always deleted.
  double min_dead_fraction = 0.5;
};

struct CompactProgress {
  uint32_t packs_done = 0;
  uint32_t packs_total = 0;  // packs selected for rewriting
  uint64_t bytes_copied = 0;  // live record bytes copied so far
};

struct CompactResult {
  uint32_t packs_rewritten = 0;  // old packs deleted
  uint64_t objects_moved = 0;    // live records copied into new packs
  uint64_t bytes_freed = 0;      // pack file bytes removed minus bytes written
};

// Receives file bytes in order while reading. Returning an error stops.
using ByteSink = std::function<Result<void>(std::span<const uint8_t>)>;

class Store {
 public:
  enum class Mode { kOpen, kCreate };
  virtual ~Store() = default;

  // Opens the store in directory `dir` (kCreate makes it if absent and
  // refuses one that exists). Cleans up what a killed writer left behind.
  // Errors: "dir: reason" for missing dirs, bad format version, I/O.
  static Result<std::unique_ptr<Store>> Open(const std::string& dir, Mode mode);

  virtual Result<bool> Has(const ObjectId& id) const = 0;
  // The ids of `ids` (ascending; repeats allowed) that are not stored, in
  // one pass of one index cursor: a batch of sorted ids reads each index
  // page once, where a Has per id would jump around the map. Errors: I/O,
  // kCorrupt (bad entry).
  virtual Result<std::vector<ObjectId>> Missing(std::span<const ObjectId> ids) const = 0;
  // Errors: "object <hex>: not found", I/O.
  virtual Result<ObjectInfo> Stat(const ObjectId& id) const = 0;
  // Returns the object's bytes, verified against its id. For whole objects
  // only (chunks, manifests, trees, nodes), not for streaming large files.
  virtual Result<std::vector<uint8_t>> Get(const ObjectId& id) const = 0;
  // Streams a file's bytes (FileRef from PutFile) into `sink`, chunk by
  // chunk, each chunk verified. Memory bounded by the max chunk size.
  virtual Result<void> ReadFile(const FileRef& f, const ByteSink& sink) const = 0;
  // Writes a file's bytes to `fd` from offset 0, leaving holes for
  // all-zero 4 KiB blocks and setting the final size (sparse stays sparse).
  // Errors: the store's; a failed write or truncate as "write: <errno
  // text>" (the store does not know fd's name: callers wrap it).
  virtual Result<void> WriteFileTo(const FileRef& f, int fd) const = 0;
  // Materializes a file into the empty file `fd` by reflinking (FICLONERANGE)
  // its chunk records from the packs, possible when every chunk is stored
  // raw at a block-aligned offset and the filesystem shares extents.
  // Returns false with nothing written when it cannot; callers then use
  // WriteFileTo. Errors: I/O other than "not supported here".
  virtual Result<bool> CloneFileTo(const FileRef& f, int fd) const = 0;
  // Calls fn for every indexed object in id order (objects committed during
  // the walk may or may not be seen). fn may use the store. Stops on fn's error.
  virtual Result<void> ForEach(
      const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn) const = 0;
  virtual Result<StoreStats> Stats() const = 0;
  // How many index commits have removed objects (drops, fsck salvage)
  // since the store was made. An object known stored when this read N is
  // still stored while it reads N: a cache of "this id is stored" may
  // record N and trust itself while it matches (snap/'s tree hints). Read
  // it with a batch open (the writer lock held) for the value to stay put.
  // Errors: I/O, kCorrupt.
  virtual Result<uint64_t> Removals() const = 0;

  // Starts a write batch; blocks until no other writer (in any process,
  // this one included: never call it while holding a batch) holds the
  // store. Errors: I/O.
  virtual Result<std::unique_ptr<Batch>> BeginBatch() = 0;
  // A batch that gives every Put and PutFile the id a real batch would,
  // and stores nothing: no lock, no write, Commit fails (kInvalid). For
  // read-only comparisons (fsck's live-tree check). Thread-safe like Put.
  virtual std::unique_ptr<Batch> HashingBatch() = 0;

  // Reclaims the space of dropped objects: copies the live records of packs
  // chosen by `opts` into a new pack, commits their new locations, then
  // deletes the old pack files (crash-safe at every step, see
  // docs/store-format.md). Cost is proportional to the packs rewritten.
  // Takes the writer lock one group of packs (~64 MiB of live data) at a
  // time, so batches of other writers interleave (like BeginBatch, it
  // blocks while a batch is open, also in this process). Readers in any process
  // keep working. Errors: I/O; kCorrupt when a pack's records disagree
  // with the index (nothing is deleted then; run fsck repair).
  virtual Result<CompactResult> Compact(
      const CompactOptions& opts,
      const std::function<void(const CompactProgress&)>& progress = {}) = 0;

  virtual const std::string& dir() const = 0;
};

}  // namespace agentenv::store
