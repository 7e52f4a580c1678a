// Repo::CheckHistory and Repo::RepairHistory (see repo.h): the references
// above the store, and marking what lost objects broke.
#include <unordered_map>
#include <unordered_set>

#include "snap/fsops.h"
#include "snap/layout.h"
#include "snap/refcount.h"
#include "snap/repo.h"
#include "snap/scratch.h"
#include "store/manifest.h"

namespace agentenv::snap {
namespace {

// What is wrong below one object: the number of problems and the first.
struct Damage {
  uint64_t problems = 0;
  std::string kind;   // of the first: "missing-object", "bad-tree", "bad-node"
  std::string first;  // "file usr/bin/x: object <id> is missing"

  void Add(const Damage& d) {
    if (!problems && d.problems) kind = d.kind, first = d.first;
    problems += d.problems;
  }
  void Add(std::string k, std::string what) { Add(Damage{1, std::move(k), std::move(what)}); }
  std::string Describe() const {
    return problems > 1 ? first + " (and " + std::to_string(problems - 1) + " more)" : first;
  }
};

// Finds what each node is missing. Results are memoized per tree and per
// manifest, so shared subtrees are read once however many nodes reach
// them; the first path a shared object was seen at names it. Single-object
// contents are not memoized: checking one is an index lookup, and a memo
// entry per file (~140 B) was most of fsck's memory on a large tree.
class DamageWalker {
 public:
  explicit DamageWalker(const store::Store& s) : s_(s) {}

  Result<Damage> Node(const NodeRecord& r) {
    Damage d;
    AE_ASSIGN(bool has, s_.Has(r.id));
    if (!has) {
      d.Add("missing-object", "node object " + r.id.Hex() + " is missing");
    } else {
      auto n = LoadNode(s_, r.id);
      if (!n) d.Add("bad-node", "node object: " + n.error().message);
      else if (n->tree != r.tree) d.Add("bad-node", "index and node object disagree on the tree");
    }
    AE_ASSIGN(Damage t, Tree(r.tree, ""));
    d.Add(t);
    return d;
  }

 private:
  Result<Damage> Tree(const store::ObjectId& id, const std::string& path) {
    if (auto it = memo_.find(id); it != memo_.end()) return it->second;
    Damage d;
    std::string where = path.empty() ? "/" : path;
    AE_ASSIGN(bool has, s_.Has(id));
    if (!has) {
      d.Add("missing-object", "tree " + where + ": object " + id.Hex() + " is missing");
    } else if (auto t = LoadTree(s_, id); !t) {
      d.Add("bad-tree", "tree " + where + " (" + id.Hex() + "): " + t.error().message);
    } else {
      for (const Entry& e : *t) {
        std::string p = path.empty() ? e.name : path + "/" + e.name;
        if (e.kind == Kind::kDir) {
          AE_ASSIGN(Damage sub, Tree(e.id, p));
          d.Add(sub);
        } else if (e.kind == Kind::kFile) {
          AE_ASSIGN(Damage c, Content(e, p));
          d.Add(c);
        }
      }
    }
    Remember(id, d);
    return d;
  }

  // A memo of every tree would be a row per unique tree of history (3
  // million at a million nodes): it is emptied when full. Consecutive nodes
  // share most subtrees, so what was just read is what is asked next.
  void Remember(const store::ObjectId& id, const Damage& d) {
    if (memo_.size() >= kMaxMemo) memo_.clear();
    memo_.emplace(id, d);
  }
  static constexpr size_t kMaxMemo = 1 << 17;

  Result<Damage> Content(const Entry& e, const std::string& path) {
    const bool manifest = e.content == store::ObjectType::kManifest;
    if (auto it = manifest ? memo_.find(e.id) : memo_.end(); it != memo_.end()) return it->second;
    Damage d;
    AE_ASSIGN(bool has, s_.Has(e.id));
    if (!has) {
      d.Add("missing-object", "file " + path + ": object " + e.id.Hex() + " is missing");
    } else if (e.content == store::ObjectType::kManifest) {
      auto bytes = s_.Get(e.id);
      auto chunks = bytes ? store::DecodeManifest(*bytes) : Unexpected<Error>(bytes.error());
      if (!chunks) {
        d.Add("bad-tree", "file " + path + ": manifest " + e.id.Hex() + ": " + chunks.error().message);
      } else {
        for (const auto& c : *chunks) {
          AE_ASSIGN(bool chunk, s_.Has(c.id));
          if (!chunk) d.Add("missing-object", "file " + path + ": chunk " + c.id.Hex() + " is missing");
        }
      }
    }
    if (manifest) Remember(e.id, d);
    return d;
  }

  const store::Store& s_;
  std::unordered_map<store::ObjectId, Damage, store::ObjectIdHash> memo_;
};

std::string Name(const store::ObjectId& id) { return "node " + id.Hex().substr(0, 12); }

// A scratch metadata index for a recount: work/recount-XXXXXX, removed
// when this goes (a killed fsck's is reclaimed by the next one). The
// recount lives there, committed as it grows, not in a transaction of the
// live index: at a million nodes it is millions of rows, whose dirty pages
// one transaction would hold in memory.
class RecountScratch {
 public:
  static Result<RecountScratch> Make(const std::string& root) {
    AE_ASSIGN(ScratchDir dir, ScratchDir::Make(layout::WorkParent(root), "recount"));
    RecountScratch out(std::move(dir));
    AE_ASSIGN(out.db_, MetaDb::Open(out.dir_.path() + "/meta", true));
    return out;
  }
  MetaDb& db() { return *db_; }

 private:
  explicit RecountScratch(ScratchDir dir) : dir_(std::move(dir)) {}
  ScratchDir dir_;                // removed after db_ is closed (members go in reverse)
  std::unique_ptr<MetaDb> db_;
};

// Recounts into `scratch`'s recount table what `txn`'s live count table
// holds: every node but the deferred ones (the live counts do not hold
// those yet, see refcount.h), and the stat cache; calls fn for each object
// whose live count differs and returns how many differ. Then adds the
// deferred nodes to the recount, so it covers all of history. `txn` is
// held open so that history stays still. Errors: I/O, kCorrupt (a tree or
// manifest that does not decode).
Result<uint64_t> CompareWithRecount(
    const store::Store& s, const MetaDb& meta, MetaDb::Txn& txn, MetaDb& scratch,
    const std::function<void(const store::ObjectId&, uint64_t, uint64_t)>& fn) {
  std::vector<std::pair<store::ObjectId, store::ObjectId>> deferred;  // (node, tree): at most a few dozen
  AE_TRY(txn.ForEachDeferred([&](const store::ObjectId& node, const store::ObjectId& tree) -> Result<void> {
    deferred.emplace_back(node, tree);
    return {};
  }));
  std::unordered_set<store::ObjectId, store::ObjectIdHash> except;
  for (const auto& d : deferred) except.insert(d.first);
  AE_TRY(CountInto(s, meta, scratch, MetaDb::Txn::Counts::kRecount, except));
  uint64_t differ = 0;
  AE_ASSIGN(bool counted, txn.Counted());
  AE_ASSIGN(auto recount, scratch.Begin());
  if (counted) {  // else built by the first retain or gc: nothing to compare
    AE_TRY(txn.CompareCounts(*recount, [&](const store::ObjectId& id, uint64_t live, uint64_t n) -> Result<void> {
      if (fn) fn(id, live, n);
      ++differ;
      return {};
    }));
  }
  RefCounter rc(s, *recount, true, MetaDb::Txn::Counts::kRecount);
  for (const auto& [node, tree] : deferred) AE_TRY(rc.AddNode(node, tree));
  AE_TRY(recount->Commit());
  return differ;
}

constexpr uint64_t kCountFindings = 20;  // listed one by one; the rest summed up


// Whether every object `scratch`'s recount table names is stored: the ids
// come in id order, so the store is asked in sorted batches (one forward
// cursor each) rather than one random index lookup per object.
Result<bool> AllStored(const store::Store& s, MetaDb& scratch) {
  constexpr size_t kBatch = 1 << 16;
  std::vector<store::ObjectId> batch;
  batch.reserve(kBatch);
  bool all = true;
  auto flush = [&]() -> Result<void> {
    AE_ASSIGN(auto missing, s.Missing(batch));
    all = all && missing.empty();
    batch.clear();
    return {};
  };
  AE_ASSIGN(auto txn, scratch.Begin());
  AE_TRY(txn->ForEachCounted(MetaDb::Txn::Counts::kRecount, [&](const store::ObjectId& id) -> Result<void> {
    batch.push_back(id);
    return batch.size() == kBatch ? flush() : Result<void>();
  }));
  AE_TRY(flush());
  return all;
}

}  // namespace

Result<uint64_t> Repo::CheckHistory(const std::function<void(const HistoryFinding&)>& finding) {
  uint64_t errors = 0;
  auto report = [&](std::string kind, std::string message, bool known = false) {
    if (!known) ++errors;
    if (finding) finding({std::move(kind), std::move(message), known});
  };
  // Everything history reaches, once: a recount into a scratch index
  // (counts live in LMDB, not in memory), compared with the live counts
  // on the way, then one sorted sweep of it against the store. A write
  // transaction of the live index is held meanwhile and aborted: history
  // stays still and nothing changes. When all of it is there, no node can
  // miss anything; only then is each node walked on its own (to name what
  // it misses and where), which costs an index lookup per file.
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(RecountScratch scratch, RecountScratch::Make(root_));
  std::vector<std::string> count_findings;  // reported only when history is whole
  Result<uint64_t> differ = CompareWithRecount(*store_, *meta_, *txn, scratch.db(), [&](const store::ObjectId& id, uint64_t live,
                                                                                     uint64_t recounted) {
    if (count_findings.size() < kCountFindings)
      count_findings.push_back("object " + id.Hex() + ": reference count " + std::to_string(live) + ", but " +
                               std::to_string(recounted) + " references exist (fsck --repair recounts)");
  });
  bool whole = false;
  if (differ) {
    AE_ASSIGN(whole, AllStored(*store_, scratch.db()));
  }
  DamageWalker walker(*store_);
  AE_TRY(meta_->ForEachNode([&](const NodeRecord& r) -> Result<bool> {
    Damage d;
    if (whole) {
      auto n = LoadNode(*store_, r.id);
      if (!n) d.Add("bad-node", "node object: " + n.error().message);
      else if (n->tree != r.tree) d.Add("bad-node", "index and node object disagree on the tree");
    } else {
      AE_ASSIGN(d, walker.Node(r));
    }
    if (d.problems && r.damaged()) report("known-damaged", Name(r.id) + " (marked damaged): " + d.Describe(), true);
    else if (d.problems) report(d.kind, Name(r.id) + ": " + d.Describe());
    else if (r.damaged())
      report("known-damaged", Name(r.id) + " is marked damaged but is whole again (fsck --repair clears the mark)", true);
    if (r.parent) {
      AE_ASSIGN(bool known, txn->HasNode(*r.parent));
      if (!known) report("dangling-ref", Name(r.id) + ": parent " + r.parent->Hex().substr(0, 12) + " is not in history");
    }
    return true;
  }));
  AE_ASSIGN(auto refs, txn->ListRefs(""));
  for (const auto& [ref, id] : refs) {
    AE_ASSIGN(bool known, txn->HasNode(id));
    if (!known) report("dangling-ref", "ref " + ref + " names " + id.Hex().substr(0, 12) + ", which is not in history");
  }
  // The reference counts that differ from the recount, reported only when
  // history is whole: a lost object makes its children's counts differ
  // from a recount, and --repair rebuilds them.
  if (errors) return errors;
  if (!differ) return Unexpected<Error>(differ.error());  // not damage the walk could name
  for (std::string& f : count_findings) report("refcount", std::move(f));
  if (*differ > kCountFindings)
    report("refcount", std::to_string(*differ - kCountFindings) + " more objects have a wrong reference count");
  return errors;
}

Result<HistoryRepair> Repo::RepairHistory() {
  AE_ASSIGN(WriteLock lock, Lock());
  HistoryRepair res;
  {
    // Counts that differ from a recount, before anything here changes them.
    AE_ASSIGN(auto txn, meta_->Begin());
    AE_ASSIGN(bool counted, txn->Counted());
    if (counted) {  // else there is nothing to compare
      AE_ASSIGN(RecountScratch scratch, RecountScratch::Make(root_));
      AE_ASSIGN(res.counts_fixed, CompareWithRecount(*store_, *meta_, *txn, scratch.db(), {}));
    }
  }
  // Marks, page by page: each page's changes commit on their own (marking
  // again gives the same marks, so a killed repair loses nothing).
  DamageWalker walker(*store_);
  for (uint64_t next = 0;;) {
    AE_ASSIGN(std::vector<NodeRecord> page, meta_->NodesFrom(next, 1024));
    if (page.empty()) break;
    AE_ASSIGN(auto txn, meta_->Begin());
    for (const NodeRecord& old : page) {
      next = old.seq + 1;
      AE_ASSIGN(Damage d, walker.Node(old));
      NodeRecord r = old;
      if (d.problems) {
        r.flags |= NodeRecord::kDamaged;
        r.damage = d.Describe();
      } else {
        r.flags &= ~NodeRecord::kDamaged;
        r.damage.clear();
      }
      if (r.parent) {
        AE_ASSIGN(bool known, txn->HasNode(*r.parent));
        if (!known) {
          AE_TRY(txn->RemoveChild(*r.parent, r.id));
          res.fixed.push_back(Name(r.id) + ": parent " + r.parent->Hex().substr(0, 12) +
                              " is not in history; the node is now a root");
          r.parent.reset();
        }
      }
      if (r.flags == old.flags && r.damage == old.damage && r.parent == old.parent) continue;
      AE_TRY(txn->PutNode(r));
      if (r.damaged() && !old.damaged()) res.marked.push_back(r);
      if (!r.damaged() && old.damaged()) res.healed.push_back(r);
    }
    AE_TRY(txn->Commit());
  }
  AE_ASSIGN(auto newest, meta_->Recent(1));
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(auto refs, txn->ListRefs(""));
  for (const auto& [ref, id] : refs) {
    AE_ASSIGN(bool known, txn->HasNode(id));
    if (known) continue;
    if (ref == "HEAD" && !newest.empty()) {
      AE_TRY(txn->SetRef("HEAD", newest.front().id));
      Operation op;
      op.time_ns = NowNs();
      op.kind = OpKind::kRepair;
      op.to = newest.front().id;  // the node HEAD named is not in history: no `from`
      AE_TRY(txn->PutOperation(op));
      res.fixed.push_back("HEAD named " + id.Hex().substr(0, 12) + ", which is not in history; it now names the newest node " +
                          newest.front().id.Hex().substr(0, 12));
    } else {
      AE_TRY(txn->DeleteRef(ref));
      res.fixed.push_back("ref " + ref + " named " + id.Hex().substr(0, 12) + ", which is not in history; removed");
    }
  }
  // A stat cache entry naming lost content would let the next snapshot
  // record it without reading the file: forget them all, so the next
  // snapshot reads (and stores again) every file.
  bool stale = false;
  Result<void> err;
  AE_TRY(meta_->ForEachStat([&](const StatEntry& e) {
    if (stale || !err) return;
    auto has = store_->Has(e.ref.id);
    if (!has) err = Unexpected<Error>(has.error());
    else stale = !*has;
  }));
  AE_TRY(err);
  if (stale) {
    AE_ASSIGN(res.stat_cleared, txn->ClearStats());
  }
  AE_TRY(txn->Commit());
  // Reference counts are rebuilt from what is left (this also lists
  // unreferenced objects as garbage for the next gc).
  AE_TRY(RebuildCounts(*store_, *meta_));
  return res;
}

}  // namespace agentenv::snap
