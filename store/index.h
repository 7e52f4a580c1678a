// The LMDB index of a store: objects (id -> location), packs (per-pack
// accounting, including dead records awaiting compaction) and meta (format
// version, chunker parameters, next pack number). See docs/store-format.md.
//
// One LMDB environment under <store>/index, opened with MDB_NOTLS so that
// read transactions are per call and never tied to a thread. Readers never
// block the writer. The map grows on MDB_MAP_FULL (the write is retried);
// readers pick up a map grown by another process (MDB_MAP_RESIZED).
// Pages read through the map are unmapped from the process again once its
// file-backed RSS passes a budget (store/map_trim.h), so walks and lookups
// over a large index keep a bounded RSS.
#pragma once

#include <lmdb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "store/inspect.h"
#include "store/map_trim.h"
#include "store/store.h"

namespace agentenv::store {

class Index {
 public:
  // Opens (creating when `create`) the environment in `dir` and clears
  // reader slots of dead processes. Errors: "dir: reason".
  static Result<std::unique_ptr<Index>> Open(const std::string& dir, bool create);
  ~Index();

  // All methods are thread-safe.
  Result<std::optional<ObjectInfo>> Lookup(const ObjectId& id) const;
  // See Store::Missing.
  Result<std::vector<ObjectId>> Missing(std::span<const ObjectId> ids) const;
  // Calls fn for every object in id order. Reads in pages of a few
  // thousand entries, each page in its own read transaction, so fn may call
  // back into the index and long walks pin no old snapshot; objects
  // committed or dropped during the walk may or may not be seen.
  Result<void> ForEach(
      const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn) const;
  // A consistent view (store/inspect.h): holds a read transaction and
  // resize_mu_ shared until destroyed. Errors: I/O.
  Result<std::unique_ptr<IndexView>> OpenView() const;
  Result<std::map<uint32_t, PackInfo>> Packs() const;
  Result<std::optional<std::string>> GetMeta(const std::string& key) const;
  // See Store::Removals.
  Result<uint64_t> Removals() const;

  struct Update {
    std::vector<std::pair<ObjectId, ObjectInfo>> objects;
    std::vector<ObjectId> removed;  // objects to delete (absent ones are ignored)
    std::vector<PackInfo> packs;  // replace these rows
    std::vector<uint32_t> removed_packs;  // pack rows to delete
    std::vector<std::pair<std::string, std::string>> meta;
  };
  // Applies `u` in one durable transaction: all or nothing. Order inside:
  // removals (counted in meta "removals" when there are any), then object
  // puts, then packs, then meta.
  Result<void> Apply(const Update& u);

 private:
  Index() = default;
  // Runs fn in a read transaction of the latest commit, adopting a map
  // grown elsewhere.
  Result<void> Read(const std::function<Result<void>(MDB_txn*)>& fn) const;
  // A read transaction of the latest commit: a spare one renewed, else a
  // new one. Holds *lock (resize_mu_ shared) on success.
  Result<MDB_txn*> TakeRead(std::shared_lock<std::shared_mutex>* lock) const;
  // Resets txn and keeps it as a spare (or aborts it when there are enough).
  void GiveBack(MDB_txn* txn) const;
  friend class IndexViewImpl;
  // Begins a read transaction under *lock (shared), adopting a map grown
  // elsewhere.
  Result<MDB_txn*> BeginRead(std::shared_lock<std::shared_mutex>* lock) const;
  Result<std::optional<ObjectInfo>> Get(MDB_txn* txn, const ObjectId& id) const;
  Result<void> TryApply(const Update& u, bool* map_full);
  // Meta "removals" as txn sees it (0 when absent).
  Result<uint64_t> ReadRemovals(MDB_txn* txn) const;
  Result<void> ReadPacks(MDB_txn* txn, std::map<uint32_t, PackInfo>* packs) const;
  // Calls fn for up to `limit` objects after `after` (from the first when
  // null); *count says how many were visited.
  Result<void> Walk(MDB_txn* txn, const ObjectId* after, size_t limit,
                    const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn,
                    size_t* count) const;

  std::string dir_;
  MDB_env* env_ = nullptr;
  MDB_dbi objects_ = 0, packs_ = 0, meta_ = 0;
  // mdb_env_set_mapsize needs no live transaction in this process: readers
  // hold this shared, resizing holds it exclusive.
  mutable std::shared_mutex resize_mu_;
  // Ticked once per entry read or written, always under resize_mu_ (shared),
  // so that a trim never races a resize moving the map.
  std::unique_ptr<MapTrimmer> trim_;
  // Reset read transactions kept for the next lookups: renewing one keeps
  // its reader slot, so a lookup takes no allocation and no reader-table
  // lock (a snapshot looks up each of its ~8k trees). At most kSpares.
  mutable Mutex spare_mu_;
  mutable std::vector<MDB_txn*> spare_ GUARDED_BY(spare_mu_);
  static constexpr size_t kSpares = 16;
};

}  // namespace agentenv::store
