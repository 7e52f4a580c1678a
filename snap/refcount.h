// snap/refcount: reference counts of stored objects, so that gc costs what
// was dropped instead of a mark of everything live.
//
// Who references what (one reference per naming, so an id named twice by
// one tree counts twice):
//   - a node record: its node object and its root tree;
//   - a tree (while its own count is > 0): each subtree and each file's
//     content (chunk or manifest);
//   - a manifest (while its count is > 0): each of its chunks;
//   - a stat cache entry: the content it names (a later snapshot may name
//     that content without reading the file, so it must not be dropped).
// Only an object going 0 -> 1 is opened to count its children, and only one
// reaching 0 is opened to release them, so a snapshot costs O(changes) and
// dropping a node costs O(what only it reached). An object counted while
// missing from the store (a damaged node's) is marked pending: its children
// are counted when it is stored again, and never released before. Ids reaching 0 are put in
// the garbage table; gc drops those still at 0. Counts live in LMDB (meta/),
// never all in memory.
//
// A snapshot defers its node's references: it only records (node, root
// tree) in meta/'s deferred table, and the increments are made later, for
// many nodes at once, by ApplyDeferred. Each new tree adds a reference to
// every child, and ids are random, so one snapshot's increments dirty a
// page of the count table per few children; applied together, the
// increments of dozens of snapshots share those pages. Deferred counts are
// never too low where it matters: whatever reads counts to drop or release
// (gc, retain, fsck) applies the deferred rows first, and counts a snapshot
// does not defer (its stat cache's) are made at once, so a release matches
// its own add. An object whose count reaches 0 while deferred references to
// it wait goes to the garbage table, and gc keeps it: gc drops only ids
// still at 0 once the deferred rows are applied.
//
// A RefCounter works inside one MetaDb write transaction, so references
// change atomically with the records that make them. Not thread-safe (one
// transaction, one thread).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "snap/diff.h"
#include "snap/meta.h"
#include "store/store.h"

namespace agentenv::snap {

struct RefStats {
  uint64_t objects_read = 0;  // trees and manifests opened to count their children
  uint64_t released = 0;      // objects whose count reached 0 (now garbage)
};

class RefCounter {
 public:
  // `enabled` false (a repository whose table is not built yet, see
  // RebuildCounts): the counting calls change nothing; PutStat and ClearStats
  // still write the stat cache. `load` reads trees (default: from `store`);
  // a snapshot passes its in-memory encodings of the trees it made.
  RefCounter(const store::Store& store, MetaDb::Txn& txn, bool enabled,
             MetaDb::Txn::Counts table = MetaDb::Txn::Counts::kLive, TreeLoader load = {});

  // A node record was added with sequence number `seq`: records its
  // references to be counted by ApplyDeferred. Errors: I/O.
  Result<void> DeferNode(uint64_t seq, const store::ObjectId& node, const store::ObjectId& tree);
  // A node record was added (or removed): its node object and root tree.
  // Errors: I/O, kCorrupt (a tree or manifest going 0 -> 1 does not decode;
  // one that is missing counts but has no children, as in a damaged node).
  Result<void> AddNode(const store::ObjectId& node, const store::ObjectId& tree);
  Result<void> ReleaseNode(const store::ObjectId& node, const store::ObjectId& tree);
  // A stat cache entry's content.
  Result<void> AddContent(const store::FileRef& f);
  Result<void> ReleaseContent(const store::FileRef& f);
  // Writes a stat cache entry, moving the reference from the content the
  // old entry named (if any) to the new one.
  Result<void> PutStat(std::string_view path, const StatEntry& e);
  // Removes a stat cache entry (a deleted file), releasing its content.
  Result<void> DeleteStat(std::string_view path);
  // Empties the stat cache, releasing what its entries named; returns how
  // many entries there were.
  Result<uint64_t> ClearStats();

  // An object this snapshot stored (again): if it was counted while
  // missing (pending), its children are counted now. Without this, a lost
  // tree that comes back below an already counted parent would leave its
  // children undercounted.
  Result<void> Heal(const store::ObjectId& id, store::ObjectType type);

  const RefStats& stats() const { return stats_; }

 private:
  Result<void> CountChildren(const store::ObjectId& id, store::ObjectType type, bool pending);
  Result<void> Add(const store::ObjectId& id, store::ObjectType type);
  Result<void> Release(const store::ObjectId& id, store::ObjectType type);
  // Calls fn for each child of a tree or manifest (which must be stored).
  Result<void> Children(const store::ObjectId& id, store::ObjectType type,
                        const std::function<Result<void>(const store::ObjectId&, store::ObjectType)>& fn);

  const store::Store& store_;
  MetaDb::Txn& txn_;
  bool enabled_;
  MetaDb::Txn::Counts table_;
  TreeLoader load_;
  RefStats stats_;
};

// Snapshots apply the deferred rows once this many wait.
inline constexpr uint64_t kDeferredNodesMax = 64;

// Counts the references of every deferred node (AddNode for each, oldest
// first) and empties the deferred table, inside `txn`; returns how many
// nodes were applied. `load` reads trees (default: from `store`). Callers
// hold the repository lock, and the count table must be built (Counted).
// Errors: as AddNode.
Result<uint64_t> ApplyDeferred(const store::Store& store, MetaDb::Txn& txn, TreeLoader load = {});

// Counts into `into`'s table `table` (on top of what it holds: callers
// clear it first) every reference of `meta`'s node records, but those in
// `except`, and of its stat cache, in transactions of kCountChunk nodes
// (and of kCountChunk * 64 stat cache entries): counts live in LMDB and
// each transaction's dirty pages are a chunk's, so memory stays bounded at
// any history size. `into` is `meta` (the live counts) or a scratch index
// (fsck's recount). Cost: every unique tree and manifest read once.
// Errors: I/O, kCorrupt (a tree or manifest that does not decode).
Result<RefStats> CountInto(const store::Store& store, const MetaDb& meta, MetaDb& into, MetaDb::Txn::Counts table,
                           const std::unordered_set<store::ObjectId, store::ObjectIdHash>& except = {});
inline constexpr uint64_t kCountChunk = 256;

// Builds the live count table from scratch: empties it (a transaction of its
// own: the table then reads as not built, so a crash before the end leaves
// it to be built again), counts every reference (CountInto), then puts
// every stored object without a reference in the garbage table (objects of
// snapshots that crashed before their node was committed, or of a
// repository older than the table) and marks the table counted. Cost: as
// CountInto, plus one pass over the store index. Callers hold the
// repository lock. Errors: as CountInto.
Result<RefStats> RebuildCounts(const store::Store& store, MetaDb& meta);

}  // namespace agentenv::snap
