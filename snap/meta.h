// snap/meta: the repository's metadata index (LMDB under <root>/meta).
//
// Tables: nodes (id -> NodeRecord), seq (creation order -> id), children
// (parent -> child ids), refs (name -> id: "HEAD", "tag/<name>") and stat
// (tree-relative path -> StatEntry, the stat cache that lets a snapshot skip
// reading unchanged files). Node objects in the store are the truth; this
// index makes log/head/branches O(answer) and holds the mutable graph.
//
// Thread-safety: a MetaDb may be shared by threads. Readers never block the
// writer; write transactions are serialized by LMDB across processes.
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "snap/tree.h"
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
  static constexpr uint32_t kPinned = 1, kDamaged = 2;
  bool damaged() const { return flags & kDamaged; }
};

// What a file looked like when its content id was last computed.
struct StatEntry {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  uint32_t mode = 0;  // full st_mode
  uint32_t uid = 0, gid = 0;
  Xattrs xattrs;
  store::FileRef ref;
};

class MetaDb {
 public:
  // Errors: "dir: reason".
  static Result<std::unique_ptr<MetaDb>> Open(const std::string& dir, bool create);
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
  // Every node record in creation order (retention, gc).
  Result<std::vector<NodeRecord>> AllNodes() const;

  // A read view of the stat cache for one thread (holds a read transaction).
  class StatReader {
   public:
    ~StatReader();
    std::optional<StatEntry> Get(std::string_view path) const;

   private:
    friend class MetaDb;
    MDB_txn* txn_ = nullptr;
    MDB_dbi dbi_ = 0;
  };
  Result<std::unique_ptr<StatReader>> ReadStats() const;

  // One write transaction; nothing is visible until Commit.
  class Txn {
   public:
    ~Txn();
    Result<uint64_t> NextSeq();
    Result<void> PutNode(const NodeRecord& r);
    Result<void> AddChild(const store::ObjectId& parent, const store::ObjectId& child);
    Result<void> RemoveChild(const store::ObjectId& parent, const store::ObjectId& child);
    // Removes the node's record, its seq entry and its children list.
    Result<void> DeleteNode(const NodeRecord& r);
    Result<void> SetRef(const std::string& name, const store::ObjectId& id);
    Result<void> DeleteRef(const std::string& name);
    Result<void> PutStat(std::string_view path, const StatEntry& e);
    Result<void> DeleteStat(std::string_view path);
    // Empties the stat cache; returns how many entries it had.
    Result<uint64_t> ClearStats();
    Result<void> Commit();

   private:
    friend class MetaDb;
    const MetaDb* db_ = nullptr;
    MDB_txn* txn_ = nullptr;
  };
  Result<std::unique_ptr<Txn>> Begin();

 private:
  MetaDb() = default;
  std::string dir_;
  MDB_env* env_ = nullptr;
  MDB_dbi nodes_ = 0, seq_ = 0, children_ = 0, refs_ = 0, stat_ = 0, info_ = 0;
};

}  // namespace agentenv::snap
