// snap/meta: the repository's metadata index (LMDB under <root>/meta).
//
// Tables: nodes (id -> NodeRecord), seq (creation order -> id), children
// (parent -> child ids), refs (name -> id: "HEAD", "tag/<name>"), stat
// (tree-relative path -> StatEntry, the stat cache that lets a snapshot skip
// reading unchanged files), entries (path -> EntryStat, the same for the
// xattrs of directories and special files and the targets of symlinks),
// refcount (object id -> references, absent = 0),
// garbage (ids whose count reached 0: gc's candidates; rows of older
// repositories, keyed by id), garbage_log (the same, keyed by an appended
// sequence number: see PutGarbage), recount (scratch
// for fsck's comparison, empty outside its aborted transaction), oplog
// (time -> operation: every move of HEAD, snap/oplog.h) and oplog_nodes
// (node id -> the times of the operations naming it). Node
// objects in the store are the truth; this index makes log/head/branches
// O(answer) and holds the mutable graph. Counting rules: snap/refcount.h.
//
// Pages read through LMDB's map are unmapped from the process again once
// its file-backed RSS passes a budget (store/map_trim.h): scans of the stat
// cache and count tables keep a bounded RSS at any tree size.
//
// Thread-safety: a MetaDb may be shared by threads. Readers never block the
// writer; write transactions are serialized by LMDB across processes.
#pragma once

#include <lmdb.h>
#include <sys/stat.h>

#include <cstdint>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "snap/oplog.h"
#include "snap/packages.h"
#include "snap/provenance.h"
#include "snap/time_index.h"
#include "snap/tree.h"
#include "store/map_trim.h"
#include "store/store.h"

namespace agentenv::snap {

struct NodeRecord {
  store::ObjectId id;
  uint64_t seq = 0;                       // creation order, from 1
  int64_t time_ns = 0;
  std::optional<store::ObjectId> parent;  // current parent in the graph
  store::ObjectId tree;
  uint32_t flags = 0;                     // kPinned | kDamaged
  uint64_t changes = 0;                   // changed paths versus parent
  std::string title;                      // message, else label (truncated)
  // With kDamaged: what is missing ("file usr/bin/x: object <id> is
  // missing (and 3 more)"), set by fsck --repair. The node stays in
  // history; restore refuses it.
  std::string damage;
  // Packages installed, removed or changed versus the current parent
  // (snap/packages.h; retention recomputes them with the title when it
  // gives the node another parent). Absent: not recorded (a record from
  // before package deltas, one an older binary rewrote, or a snapshot with
  // AGENTENV_PACKAGES=off); Repo::Packages computes them from the trees.
  std::optional<PackageDeltas> packages;
  // What made the node (snap/provenance.h). Absent: not recorded (a node
  // of an older binary, or of a caller that gave none; a record an older
  // binary rewrote loses it). Retention adds the span it drops below the
  // node (Provenance::thinned).
  std::optional<Provenance> provenance;
  // Sections of a newer writer this binary does not know (tag, bytes),
  // written back unchanged when the record is rewritten.
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> unknown_sections;
  // kTitleRendered: the title was rendered from the provenance
  // (RenderTitle; no message or label was given), so it is rendered again
  // when the node gets another parent or its provenance changes. Without
  // it the title's words are kept as they are.
  static constexpr uint32_t kPinned = 1, kDamaged = 2, kTitleRendered = 4;
  bool damaged() const { return flags & kDamaged; }
};

// The stat of a path as a cache recorded it, and its xattrs as on disk.
struct StatFields {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  uint32_t mode = 0;  // full st_mode
  uint32_t uid = 0, gid = 0;
  Xattrs xattrs;
  // The fields of `st` (xattrs empty). `dev`: nonzero, the device number
  // recorded instead of st_dev (Repo::LiveStatDev: on btrfs each
  // subvolume, so each live tree swapped in, has its own).
  static StatFields Of(const struct stat& st, uint64_t dev = 0);
  // Whether `now` is the path as recorded: every field but xattrs equal
  // (an xattr change moves ctime).
  bool Matches(const StatFields& now) const {
    return dev == now.dev && ino == now.ino && size == now.size && mtime_ns == now.mtime_ns &&
           ctime_ns == now.ctime_ns && mode == now.mode && uid == now.uid && gid == now.gid;
  }
};

// What a file looked like when its content id was last computed.
struct StatEntry : StatFields {
  store::FileRef ref;
};

// What a directory, symlink or special file looked like when its xattrs
// (and a symlink's target) were last read. It references no content, so
// the entry cache is outside reference counting and fsck; an entry that
// does not match the stat of the path now is simply not used.
struct EntryStat : StatFields {
  std::string target;  // symlinks
  // Directories: the tree id a scan computed for it, stored when the store's
  // Removals() read `tree_removals`. A scan that computes the same id while
  // Removals() still reads that knows the tree is stored and skips the
  // store's lookup. Only a hint: the id is always computed from the
  // directory's entries, never taken from here.
  std::optional<store::ObjectId> tree;
  uint64_t tree_removals = 0;
};

class MetaDb {
 public:
  // Errors: "dir: reason". A new index (`create`) commits without fsync
  // until Sync: it belongs to a repository being made, which a crash before
  // Repo::FinishInit discards whole, and an fsync amid init's writes cost
  // a btrfs transaction commit that stalled every writer (1-1.6 s each).
  static Result<std::unique_ptr<MetaDb>> Open(const std::string& dir, bool create);
  // Writes every commit so far to disk and makes each later commit durable
  // when it returns. Errors: "dir: reason".
  Result<void> Sync();
  ~MetaDb();

  Result<std::optional<NodeRecord>> GetNode(const store::ObjectId& id) const;
  Result<std::optional<store::ObjectId>> GetRef(const std::string& name) const;
  // Refs whose name starts with prefix, in name order.
  Result<std::vector<std::pair<std::string, store::ObjectId>>> ListRefs(const std::string& prefix) const;
  // Newest first, at most `limit`, with seq < before (0: from the newest).
  Result<std::vector<NodeRecord>> Recent(size_t limit, uint64_t before = 0) const;
  Result<std::vector<store::ObjectId>> Children(const store::ObjectId& id) const;
  // Node ids starting with the hex prefix, at most `limit`.
  Result<std::vector<store::ObjectId>> FindPrefix(const std::string& hex, size_t limit) const;
  Result<uint64_t> NodeCount() const;
  // Calls fn with every stat cache entry (gc keeps their content).
  Result<void> ForEachStat(const std::function<void(const StatEntry&)>& fn) const;
  // The node records in creation order, from seq `from_seq` on (oldest
  // first), or newest first with seq < `before` (0: from the newest), until
  // fn returns false. One read transaction: a consistent view, whose pages
  // are unmapped again as the walk goes (the RSS stays bounded at any
  // history size); fn must not write this index from the same thread while
  // it runs (a write transaction would wait for none, but a long walk keeps
  // the pages of every commit meanwhile from being reused). Errors:
  // kCorrupt (a record that does not decode), fn's.
  Result<void> ForEachNode(const std::function<Result<bool>(const NodeRecord&)>& fn, uint64_t from_seq = 0) const;
  Result<void> ForEachRecent(const std::function<Result<bool>(const NodeRecord&)>& fn, uint64_t before = 0) const;
  // Up to `limit` node records with seq >= from_seq, in creation order (a
  // page of a walk that keeps no read transaction between pages).
  Result<std::vector<NodeRecord>> NodesFrom(uint64_t from_seq, size_t limit) const;

  // ---- The time index (snap/time_index.h; meta_time.cc).
  // Whether it holds every node. Errors: I/O.
  Result<bool> TimeIndexed() const;
  // Makes the time index hold every node: in a repository an older binary
  // made (no index) or changed (nodes it added or dropped), builds it, in
  // write transactions of kTimeChunk nodes each, so memory stays bounded and
  // an interrupted build goes on where it stopped; costs a few reads when it
  // is complete. Other writers may interleave (PutNode indexes what the
  // build has reached). Thread-safe. Errors: I/O, kCorrupt.
  Result<void> EnsureTimeIndex();
  static constexpr size_t kTimeChunk = 8192;
  // The nodes made from <= time <= to, oldest first (by time, then seq),
  // until fn returns false, after EnsureTimeIndex: one record read per
  // node of the span, nothing of the rest of history (the digest's reader).
  // Errors: as EnsureTimeIndex, kCorrupt, fn's.
  Result<void> NodesInTime(int64_t from, int64_t to, const std::function<Result<bool>(const NodeRecord&)>& fn);

  // A read view of the time index (holds a read transaction: every call
  // sees the same history). Results cover the nodes the index holds: call
  // EnsureTimeIndex first. Not thread-safe (one per thread).
  class TimeReader {
   public:
    ~TimeReader();
    // Nodes with from <= time <= to, oldest first (time, then seq), until
    // fn returns false. Errors: kCorrupt (a row that does not decode), fn's.
    Result<void> ForEach(int64_t from, int64_t to, const std::function<Result<bool>(const TimeRow&)>& fn) const;
    // The newest node made at or before t (of nodes of the same time, the
    // last made), if any.
    Result<std::optional<TimeRow>> AtOrBefore(int64_t t) const;
    // The oldest and the newest node by time.
    Result<std::optional<TimeRow>> First() const;
    Result<std::optional<TimeRow>> Last() const;
    // The index's row of node `r` (its lane), if indexed.
    Result<std::optional<TimeRow>> Row(const NodeRecord& r) const;
    // The nodes with from <= time <= to, summed: the summary's rows that
    // lie inside the range (at most 15 per level) and the nodes of its
    // edges' partial 8.6 s buckets.
    Result<TimeSum> Sum(int64_t from, int64_t to) const;
    // The nodes with from <= time <= to in at most `max_buckets` buckets of
    // equal width (those that hold nodes): the smallest width of the form
    // k 2^(33 + 3 l) (k 1..8: within twice the range / max_buckets), its
    // buckets aligned to multiples of it, the first and last clipped to
    // the range; or, when the range is too short for 2^33 ns buckets and
    // holds at most `raw_max` nodes, buckets of (range / max_buckets) from
    // `from`, summed from the nodes themselves. Cost: about 8 summary rows
    // per bucket, two lookups per bucket for its first and last node.
    struct Buckets {
      int64_t width = 0;
      std::vector<TimeBucket> buckets;
    };
    Result<Buckets> Bucketize(int64_t from, int64_t to, uint32_t max_buckets, uint64_t raw_max) const;
    // How many lanes nodes were drawn in (0: no node).
    Result<uint32_t> Lanes() const;
    // As MetaDb::GetNode, in this view.
    Result<std::optional<NodeRecord>> GetNode(const store::ObjectId& id) const;

   private:
    friend class MetaDb;
    TimeReader() = default;
    Result<TimeSum> Agg(int level, unsigned __int128 a, unsigned __int128 b) const;
    Result<void> Level(int level, uint64_t lo, uint64_t hi, const std::function<void(uint64_t, const TimeSum&)>& fn) const;
    Result<std::optional<TimeRow>> Seek(uint64_t at, bool before) const;
    const MetaDb* db_ = nullptr;
    MDB_txn* txn_ = nullptr;
  };
  Result<std::unique_ptr<TimeReader>> ReadTime() const;

  // The operation log (snap/oplog.h). Rows with from_ns <= time < to_ns,
  // oldest first, at most `limit` (page on from the last row's time + 1).
  // Errors: kCorrupt on a row that does not decode, I/O.
  Result<std::vector<Operation>> Operations(int64_t from_ns, int64_t to_ns, size_t limit) const;
  // Newest first, at most `limit`, with time < before_ns (absent: from the
  // newest; page on with the last row's time). Errors: as Operations.
  Result<std::vector<Operation>> RecentOperations(size_t limit, std::optional<int64_t> before_ns = std::nullopt) const;
  Result<uint64_t> OperationCount() const;

  // A read view of the stat and entry caches for one thread (holds a read
  // transaction).
  class StatReader {
   public:
    ~StatReader();
    std::optional<StatEntry> Get(std::string_view path) const;
    std::optional<EntryStat> GetEntry(std::string_view path) const;

   private:
    friend class MetaDb;
    // A scan asks for the entries of one directory in name order, which is
    // key order: the cursor steps forward from where the last lookup left
    // it (at most kMaxSteps keys) before it searches.
    struct Cursor {
      MDB_cursor* cursor = nullptr;  // of txn_; positioning it changes no data
      bool positioned = false;
      MDB_val at{};  // the key it is on when positioned (in the map: valid while txn_ is)
    };
    // The value of `path` in c's table, if it has one.
    std::optional<std::span<const uint8_t>> Find(Cursor& c, std::string_view path) const;
    MDB_txn* txn_ = nullptr;
    mutable Cursor stat_, entries_;
    static constexpr int kMaxSteps = 4;
    store::MapTrimmer* trim_ = nullptr;
    mutable uint64_t reads_ = 0;  // not yet told to trim_
    static constexpr uint64_t kTickEvery = 64;
  };
  Result<std::unique_ptr<StatReader>> ReadStats() const;
  // A reader that finds nothing and holds no transaction, for a tree that
  // has no cache entries (a foreign one). A read transaction held through
  // a long scan keeps every page that commits meanwhile free from being
  // reused: init --from's early writer commits stat batches while the scan
  // runs, and at 1M files the map grew to 3 GB for 0.3 GB of data.
  static std::unique_ptr<StatReader> NoStats();

  // A row of the garbage tables: gc's candidate `id`, and where the row is
  // (a sequence number in garbage_log, or, when !logged, the id's own row
  // in garbage). An id may have several rows.
  struct GarbageRow {
    store::ObjectId id;
    bool logged = true;
    uint64_t seq = 0;
  };
  // Up to `limit` rows: garbage's (in id order) first, then garbage_log's
  // (oldest first).
  Result<std::vector<GarbageRow>> Garbage(size_t limit) const;
  // References of `id` (0 when it has no row).
  Result<uint64_t> RefCount(const store::ObjectId& id) const;
  // Rows of the refcount table (objects with at least one reference).
  Result<uint64_t> CountedObjects() const;

  // One write transaction; nothing is visible until Commit.
  class Txn {
   public:
    ~Txn();
    Result<uint64_t> NextSeq();
    // The sequence number NextSeq would return, without taking it.
    Result<uint64_t> PeekSeq();
    Result<void> PutNode(const NodeRecord& r);
    // The node's record as this transaction sees it. Errors: kCorrupt, I/O.
    Result<std::optional<NodeRecord>> GetNode(const store::ObjectId& id);
    Result<void> AddChild(const store::ObjectId& parent, const store::ObjectId& child);
    Result<void> RemoveChild(const store::ObjectId& parent, const store::ObjectId& child);
    // Removes the node's record, its seq entry and its children list.
    // PutNode and DeleteNode keep the time index (snap/time_index.h): a new
    // node is indexed (its lane assigned), a rewritten one's changes and
    // thinned count follow, a removed one leaves it.
    Result<void> DeleteNode(const NodeRecord& r);
    // Up to `limit` node records with seq >= from_seq, in creation order,
    // as this transaction sees them. Errors: kCorrupt, I/O.
    Result<std::vector<NodeRecord>> NodesFrom(uint64_t from_seq, size_t limit);
    // The current children of `id` (at most `limit`).
    Result<std::vector<store::ObjectId>> Children(const store::ObjectId& id, size_t limit = SIZE_MAX);
    Result<void> SetRef(const std::string& name, const store::ObjectId& id);
    Result<void> DeleteRef(const std::string& name);
    // As MetaDb's, seen by this transaction (rows other writers committed
    // before it began, and its own).
    Result<bool> HasNode(const store::ObjectId& id);
    Result<std::vector<std::pair<std::string, store::ObjectId>>> ListRefs(const std::string& prefix);
    Result<void> PutStat(std::string_view path, const StatEntry& e);
    Result<void> DeleteStat(std::string_view path);
    Result<void> PutEntry(std::string_view path, const EntryStat& e);
    Result<void> DeleteEntry(std::string_view path);
    // Empties the stat and entry caches; returns how many stat cache
    // entries there were.
    Result<uint64_t> ClearStats();
    // The stat cache entry of `path` as this transaction sees it.
    Result<std::optional<StatEntry>> GetStat(std::string_view path);
    // Calls fn with every stat cache entry as this transaction sees it;
    // stops at fn's first error.
    Result<void> ForEachStat(const std::function<Result<void>(const StatEntry&)>& fn);

    // Calls fn(path, fields) for every row of the stat cache (kStat) or
    // the entry cache (kEntries), in path order, but those of paths longer
    // than the key limit (480 bytes; kept under a hash of the path, so
    // their path is not known here); stops at fn's first error. fn must
    // not write the table it walks.
    enum class Cache { kStat, kEntries };
    Result<void> ForEachCachedPath(Cache cache,
                                   const std::function<Result<void>(std::string_view, const StatFields&)>& fn);

    // Reference counts. kLive is the refcount table; kRecount is fsck's
    // scratch table, empty whenever a transaction commits (fsck aborts its
    // transaction, repair clears the table before committing).
    enum class Counts { kLive, kRecount };
    // A row of a count table. `pending`: the object was missing when it
    // was first counted, so its own references (children) are not counted
    // yet; they are when it is readable again (snap/refcount.h).
    struct RefRow {
      uint64_t count = 0;
      bool pending = false;
    };
    // Adds `delta` to the count of `id` and returns the new row; a row
    // reaching 0 is deleted. A decrement below 0 changes nothing and
    // returns nullopt (the table is damaged there: fsck reports it,
    // --repair recounts).
    Result<std::optional<RefRow>> AdjustRef(Counts table, const store::ObjectId& id, int64_t delta);
    Result<RefRow> GetRef(Counts table, const store::ObjectId& id);
    // Sets the pending mark of an existing row.
    Result<void> SetPending(Counts table, const store::ObjectId& id, bool pending);
    // Empties a count table (kLive also empties garbage and clears the
    // "counted" flag).
    Result<void> ClearCounts(Counts table);
    // Walks this transaction's live count table and `recount`'s kRecount
    // table (of this index or of another one: fsck's scratch) in id order
    // and calls fn(id, live, recount) for every id whose counts differ;
    // stops at fn's first error.
    Result<void> CompareCounts(
        Txn& recount, const std::function<Result<void>(const store::ObjectId&, uint64_t live, uint64_t recount)>& fn);
    // Calls fn with every id of a count table, in id order; stops at fn's
    // first error.
    Result<void> ForEachCounted(Counts table, const std::function<Result<void>(const store::ObjectId&)>& fn);
    // Whether the refcount table holds every reference, or every one but
    // those of deferred nodes (a repository made before reference counting
    // has no counts until they are built once; one where a node was made
    // without being counted or deferred, by an older binary, has none until
    // they are built again). SetCounted says all are counted (and drops the
    // deferred rows).
    Result<bool> Counted();
    Result<void> SetCounted();
    // Node references a snapshot deferred (snap/refcount.h): rows of
    // (node id, root tree) keyed by the node's seq. DeferNode marks the
    // table as holding deferred rows (an older binary then sees the count
    // table as not built and recounts instead of trusting it);
    // ClearDeferred empties it and clears that mark. Rows written before an
    // older binary's recount are stale: ForEachDeferred skips them and
    // DeferNode drops them.
    Result<void> DeferNode(uint64_t seq, const store::ObjectId& node, const store::ObjectId& tree);
    Result<uint64_t> DeferredNodes();
    // Calls fn(node, tree) for each deferred row, oldest first.
    Result<void> ForEachDeferred(
        const std::function<Result<void>(const store::ObjectId& node, const store::ObjectId& tree)>& fn);
    Result<void> ClearDeferred();
    // Appends a garbage_log row naming `id`.
    Result<void> PutGarbage(const store::ObjectId& id);
    // Removes a row Garbage returned (absent: nothing to do).
    Result<void> DeleteGarbage(const GarbageRow& row);
    // Appends an operation log row and indexes it by each node it names;
    // returns the time it is stored under: op.time_ns, or the next free
    // nanosecond when a row has that time already.
    Result<int64_t> PutOperation(const Operation& op);
    // Retention, dropping `node`: removes the log rows that name it and are
    // older than `older_than_ns` (with their index rows), and the node's
    // index rows (a younger row stays, no longer found by this node).
    // Returns how many rows went.
    Result<uint64_t> DropOperationsOf(const store::ObjectId& node, int64_t older_than_ns);
    Result<void> Commit();

   private:
    friend class MetaDb;
    // The "refcount" row of the info table: the counting rules' version.
    Result<std::string> CountedMark();
    Result<void> SetCountedMark(std::string_view mark);
    Result<void> SetCountedThrough(uint64_t next_seq);
    // A row of a path-keyed table (stat or entries).
    Result<void> PutPath(MDB_dbi dbi, std::string_view path, const std::vector<uint8_t>& bytes);
    Result<void> DeletePath(MDB_dbi dbi, std::string_view path);
    // The time index's upkeep (meta_time.cc). Indexed: seq < TimeNext().
    Result<uint64_t> TimeNext();
    Result<void> SetTimeNext(uint64_t next);
    Result<void> AddTimeNodes(int64_t delta);
    Result<void> IndexNode(const NodeRecord& r);
    Result<void> UnindexNode(const NodeRecord& stored);
    Result<void> ReindexNode(const NodeRecord& old, const NodeRecord& r);
    Result<uint32_t> AssignLane(const NodeRecord& r);
    // Adds a node's part (sign +1 or -1; changes and thinned deltas) to the
    // summary rows of every level, in time_sums_ until FlushTimeSums.
    void AddTimeSums(int64_t time_ns, int64_t nodes, int64_t changes, int64_t thinned, std::optional<uint32_t> lane);
    Result<void> FlushTimeSums();
    // Empties the time index (a rebuild from the first node).
    Result<void> ClearTimeIndex();
    const MetaDb* db_ = nullptr;
    MDB_txn* txn_ = nullptr;
    std::optional<uint64_t> garbage_next_;  // garbage_log's next sequence number, once read
    std::optional<uint64_t> time_next_;     // TimeNext, once read
    // Pending changes of timeline rows (key: level, bucket), written at
    // Commit (or when there are many): a run of nodes in one bucket costs
    // one row write, not one per node.
    struct SumDelta {
      int64_t nodes = 0, changes = 0, thinned = 0;
      std::array<int64_t, TimeSum::kLaneSlots> lanes{};
    };
    std::map<std::array<uint8_t, 9>, SumDelta> time_sums_;
  };
  Result<std::unique_ptr<Txn>> Begin();

 private:
  MetaDb() = default;
  std::string dir_;
  MDB_env* env_ = nullptr;
  MDB_dbi nodes_ = 0, seq_ = 0, children_ = 0, refs_ = 0, stat_ = 0, entries_ = 0, info_ = 0;
  MDB_dbi refcount_ = 0, garbage_ = 0, garbage_log_ = 0, recount_ = 0, deferred_ = 0;
  MDB_dbi oplog_ = 0, oplog_nodes_ = 0;
  MDB_dbi time_ = 0, timeline_ = 0, lanes_ = 0;
  // Ticked once per entry read or written by the bulk paths (stat cache,
  // count tables). The map never moves: its size is fixed at Open.
  std::unique_ptr<store::MapTrimmer> trim_;
};

}  // namespace agentenv::snap
