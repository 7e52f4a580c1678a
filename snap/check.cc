// Repo::CheckHistory and Repo::RepairHistory (see repo.h): the references
// above the store, and marking what lost objects broke.
#include <unordered_map>
#include <unordered_set>

#include "snap/fsops.h"
#include "snap/refcount.h"
#include "snap/repo.h"
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
    memo_.emplace(id, d);
    return d;
  }

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
    if (manifest) memo_.emplace(e.id, d);
    return d;
  }

  const store::Store& s_;
  std::unordered_map<store::ObjectId, Damage, store::ObjectIdHash> memo_;
};

std::string Name(const store::ObjectId& id) { return "node " + id.Hex().substr(0, 12); }

// Recounts into the scratch table of `txn` what the live count table holds:
// every node but the deferred ones (the live counts do not hold those yet,
// see refcount.h), and the stat cache; calls fn for each object whose live
// count differs and returns how many differ. Comparing this way needs no
// ApplyDeferred, whose increments (a whole tree's worth for a snapshot that
// changed every file) would be dirty pages of `txn` beside the recount's:
// at 1M files, 120 MB more. Then adds the deferred nodes to the recount,
// so it covers all of history. Errors: I/O, kCorrupt (a tree or manifest
// that does not decode).
Result<uint64_t> CompareWithRecount(
    const store::Store& s, const MetaDb& meta, MetaDb::Txn& txn,
    const std::function<void(const store::ObjectId&, uint64_t, uint64_t)>& fn) {
  std::vector<std::pair<store::ObjectId, store::ObjectId>> deferred;  // (node, tree)
  AE_TRY(txn.ForEachDeferred([&](const store::ObjectId& node, const store::ObjectId& tree) -> Result<void> {
    deferred.emplace_back(node, tree);
    return {};
  }));
  std::vector<store::ObjectId> except;
  for (const auto& d : deferred) except.push_back(d.first);
  AE_TRY(CountAll(s, meta, txn, MetaDb::Txn::Counts::kRecount, except));
  uint64_t differ = 0;
  AE_ASSIGN(bool counted, txn.Counted());
  if (counted) {  // else built by the first retain or gc: nothing to compare
    AE_TRY(txn.CompareCounts([&](const store::ObjectId& id, uint64_t live, uint64_t recount) -> Result<void> {
      if (fn) fn(id, live, recount);
      ++differ;
      return {};
    }));
  }
  RefCounter rc(s, txn, true, MetaDb::Txn::Counts::kRecount);
  for (const auto& [node, tree] : deferred) AE_TRY(rc.AddNode(node, tree));
  return differ;
}

constexpr uint64_t kCountFindings = 20;  // listed one by one; the rest summed up


// Whether every object `txn`'s recount table names is stored: the ids come
// in id order, so the store is asked in sorted batches (one forward cursor
// each) rather than one random index lookup per object.
Result<bool> AllStored(const store::Store& s, MetaDb::Txn& txn) {
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
  AE_TRY(txn.ForEachCounted(MetaDb::Txn::Counts::kRecount, [&](const store::ObjectId& id) -> Result<void> {
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
  AE_ASSIGN(std::vector<NodeRecord> nodes, meta_->AllNodes());
  std::unordered_set<store::ObjectId, store::ObjectIdHash> known;
  for (const NodeRecord& r : nodes) known.insert(r.id);
  // Everything history reaches, once: a recount into the scratch table
  // (in a write transaction that keeps history still and is aborted, so
  // nothing changes; counts live in LMDB, not in memory), compared with the
  // live counts on the way, then one sorted sweep of it against the store.
  // When all of it is there, no node can miss anything; only then is each
  // node walked on its own (to name what it misses and where), which costs
  // an index lookup per file.
  AE_ASSIGN(auto txn, meta_->Begin());
  std::vector<std::string> count_findings;  // reported only when history is whole
  Result<uint64_t> differ = CompareWithRecount(*store_, *meta_, *txn, [&](const store::ObjectId& id, uint64_t live,
                                                                          uint64_t recounted) {
    if (count_findings.size() < kCountFindings)
      count_findings.push_back("object " + id.Hex() + ": reference count " + std::to_string(live) + ", but " +
                               std::to_string(recounted) + " references exist (fsck --repair recounts)");
  });
  bool whole = false;
  if (differ) {
    AE_ASSIGN(whole, AllStored(*store_, *txn));
  }
  DamageWalker walker(*store_);
  for (const NodeRecord& r : nodes) {
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
    if (r.parent && !known.count(*r.parent))
      report("dangling-ref", Name(r.id) + ": parent " + r.parent->Hex().substr(0, 12) + " is not in history");
  }
  AE_ASSIGN(auto refs, meta_->ListRefs(""));
  for (const auto& [ref, id] : refs) {
    if (!known.count(id)) report("dangling-ref", "ref " + ref + " names " + id.Hex().substr(0, 12) + ", which is not in history");
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
  DamageWalker walker(*store_);
  AE_ASSIGN(std::vector<NodeRecord> nodes, meta_->AllNodes());
  std::unordered_set<store::ObjectId, store::ObjectIdHash> known;
  for (const NodeRecord& r : nodes) known.insert(r.id);
  AE_ASSIGN(auto txn, meta_->Begin());
  // Counts that differ from a recount, before anything here changes them.
  AE_ASSIGN(bool counted, txn->Counted());
  if (counted) {  // else there is nothing to compare
    AE_ASSIGN(res.counts_fixed, CompareWithRecount(*store_, *meta_, *txn, {}));
    AE_TRY(txn->ClearCounts(MetaDb::Txn::Counts::kRecount));
  }
  for (const NodeRecord& old : nodes) {
    AE_ASSIGN(Damage d, walker.Node(old));
    NodeRecord r = old;
    if (d.problems) {
      r.flags |= NodeRecord::kDamaged;
      r.damage = d.Describe();
    } else {
      r.flags &= ~NodeRecord::kDamaged;
      r.damage.clear();
    }
    if (r.parent && !known.count(*r.parent)) {
      AE_TRY(txn->RemoveChild(*r.parent, r.id));
      res.fixed.push_back(Name(r.id) + ": parent " + r.parent->Hex().substr(0, 12) +
                          " is not in history; the node is now a root");
      r.parent.reset();
    }
    if (r.flags == old.flags && r.damage == old.damage && r.parent == old.parent) continue;
    AE_TRY(txn->PutNode(r));
    if (r.damaged() && !old.damaged()) res.marked.push_back(r);
    if (!r.damaged() && old.damaged()) res.healed.push_back(r);
  }
  AE_ASSIGN(auto refs, meta_->ListRefs(""));
  for (const auto& [ref, id] : refs) {
    if (known.count(id)) continue;
    if (ref == "HEAD" && !nodes.empty()) {
      AE_TRY(txn->SetRef("HEAD", nodes.back().id));
      Operation op;
      op.time_ns = NowNs();
      op.kind = OpKind::kRepair;
      op.to = nodes.back().id;  // the node HEAD named is not in history: no `from`
      AE_TRY(txn->PutOperation(op));
      res.fixed.push_back("HEAD named " + id.Hex().substr(0, 12) + ", which is not in history; it now names the newest node " +
                          nodes.back().id.Hex().substr(0, 12));
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
  // Reference counts are rebuilt from what is left (this also lists
  // unreferenced objects as garbage for the next gc).
  AE_TRY(CountAll(*store_, *meta_, *txn, MetaDb::Txn::Counts::kLive));
  AE_TRY(txn->Commit());
  return res;
}

}  // namespace agentenv::snap
