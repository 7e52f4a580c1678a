// Repo::Retain and Repo::Gc (see repo.h).
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "snap/diff.h"
#include "snap/refcount.h"
#include "snap/repo.h"

namespace agentenv::snap {

namespace {

constexpr const char* kLeasePrefix = "lease/";

}  // namespace

Result<void> Repo::LeaseNode(const std::string& holder, const store::ObjectId& id) {
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(bool present, txn->HasNode(id));
  if (!present) return Fail(ErrorCode::kNotFound, "node " + id.Hex().substr(0, 12) + ": not in history");
  AE_TRY(txn->SetRef(kLeasePrefix + holder, id));
  return txn->Commit();
}

Result<void> Repo::ReleaseNode(const std::string& holder) {
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_TRY(txn->DeleteRef(kLeasePrefix + holder));
  return txn->Commit();
}

Result<std::vector<std::pair<std::string, store::ObjectId>>> Repo::NodeLeases() const {
  AE_ASSIGN(auto rows, meta_->ListRefs(kLeasePrefix));
  for (auto& [name, id] : rows) name.erase(0, std::strlen(kLeasePrefix));
  return rows;
}

Result<RetentionResult> Repo::Retain(const RetentionPolicy& policy, bool dry_run, int64_t now_ns) {
  AE_ASSIGN(WriteLock lock, Lock());
  // A lease taken while this plans (a fork) may name a node the plan
  // drops: the dropping transaction sees it and the plan is made again.
  for (int attempt = 0;; ++attempt) {
    bool leased_since = false;
    AE_ASSIGN(RetentionResult res, RetainOnce(policy, dry_run, now_ns, &leased_since));
    if (!leased_since) return res;
    if (attempt == 8) return Fail(ErrorCode::kBusy, "retain: nodes it would drop keep being leased by new workspaces; retry");
  }
}

Result<RetentionResult> Repo::RetainOnce(const RetentionPolicy& policy, bool dry_run, int64_t now_ns,
                                        bool* leased_since) {
  AE_ASSIGN(std::vector<NodeRecord> nodes, meta_->AllNodes());
  AE_ASSIGN(auto head, meta_->GetRef("HEAD"));
  AE_ASSIGN(auto tags, meta_->ListRefs("tag/"));
  AE_ASSIGN(auto leases, meta_->ListRefs(kLeasePrefix));
  std::unordered_map<store::ObjectId, size_t, store::ObjectIdHash> index, children;
  for (size_t i = 0; i < nodes.size(); ++i) {
    index[nodes[i].id] = i;
    if (nodes[i].parent) children[*nodes[i].parent]++;
  }
  std::vector<bool> keep(nodes.size(), false);
  auto protect = [&](const store::ObjectId& id) {
    if (auto it = index.find(id); it != index.end()) keep[it->second] = true;
  };
  if (head) protect(*head);
  for (const auto& [name, id] : tags) protect(id);
  for (const auto& [name, id] : leases) protect(id);
  std::map<std::pair<size_t, int64_t>, size_t> slots;  // (bucket, window) -> oldest node
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeRecord& r = nodes[i];
    size_t nchildren = children.count(r.id) ? children[r.id] : 0;
    int64_t age = now_ns - r.time_ns;
    if (!r.parent || nchildren != 1 || (r.flags & NodeRecord::kPinned) || i + policy.keep_last >= nodes.size() ||
        age < std::chrono::nanoseconds(policy.keep_within).count()) {
      keep[i] = true;
      continue;
    }
    for (size_t b = 0; b < policy.buckets.size(); ++b) {
      if (age >= std::chrono::nanoseconds(policy.buckets[b].until).count()) continue;
      int64_t width = std::chrono::nanoseconds(policy.buckets[b].width).count();
      slots.try_emplace({b, r.time_ns / width}, i);  // nodes come oldest first
      break;
    }
  }
  for (const auto& [slot, i] : slots) keep[i] = true;

  RetentionResult res;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (keep[i]) ++res.kept;
    else res.dropped.push_back(nodes[i]);
  }
  if (dry_run || res.dropped.empty()) return res;

  RefStats counting;
  AE_TRY(EnsureCounted(&counting));
  // Reparent survivors whose parent goes, recomputing their summaries.
  auto survivor = [&](std::optional<store::ObjectId> p) {
    while (p && !keep[index.at(*p)]) p = nodes[index.at(*p)].parent;
    return p;
  };
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(auto leased, txn->ListRefs(kLeasePrefix));
  for (const auto& [name, id] : leased) {
    if (auto it = index.find(id); it != index.end() && !keep[it->second]) {
      *leased_since = true;
      return res;  // the transaction aborts: nothing of this plan is written
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeRecord r = nodes[i];
    if (!keep[i] || !r.parent || keep[index.at(*r.parent)]) continue;
    std::optional<store::ObjectId> np = survivor(r.parent);
    // The span dropped below it, oldest first: each of those nodes has
    // this one line of descent (branch points are kept), so every dropped
    // node is summarized once.
    std::vector<size_t> span;
    for (auto p = r.parent; p != np; p = nodes[index.at(*p)].parent) span.push_back(index.at(*p));
    Thinned thinned;
    for (auto it = span.rbegin(); it != span.rend(); ++it) ThinNode(thinned, nodes[*it].time_ns, nodes[*it].provenance);
    Provenance prov = r.provenance.value_or(Provenance{});
    if (prov.thinned) AppendThinned(thinned, *prov.thinned);  // an earlier thinning, newer than this span
    prov.thinned = std::move(thinned);
    r.provenance = Bounded(std::move(prov));
    const store::ObjectId& from = np ? nodes[index.at(*np)].tree : EmptyTreeId();
    bool detect = PackageDeltasEnabled();
    PackageWatch watch;
    AE_ASSIGN(TreeDelta d, Delta(*store_, from, r.tree,
                                 detect ? DiffObserver([&](const Difference& x) { watch.See(x); }) : DiffObserver()));
    r.parent = np;
    r.changes = d.changes.summary().total();
    std::optional<PackageDeltas> packages;
    if (detect) {
      const store::Store& s = *store_;
      packages = watch.Resolve([&s](const store::ObjectId& t) { return LoadTree(s, t); },
                               [&s](const store::ObjectId& o) { return s.Get(o); }, from, r.tree);
    }
    if (r.flags & NodeRecord::kTitleRendered) {
      r.title = RenderTitle(*r.provenance, d.changes.Label(), packages ? &*packages : nullptr);
    } else {
      // A title not rendered from provenance keeps its words: a message
      // as it is, an automatic label led by the packages versus the new
      // parent.
      AE_ASSIGN(Node n, LoadNode(*store_, r.id));
      if (n.message.empty()) {
        std::string_view was = r.packages ? WithoutPackages(r.title, *r.packages) : std::string_view(r.title);
        r.title = CutUtf8(packages ? LeadWithPackages(*packages, was) : std::string(was), kMaxTitle);
      }
    }
    r.packages = std::move(packages);
    AE_TRY(txn->PutNode(r));
    if (np) AE_TRY(txn->AddChild(*np, r.id));
    ++res.reparented;
  }
  // The dropped nodes' references go in the same transaction as their
  // records: what only they reached reaches 0 and becomes gc's garbage.
  RefCounter refs(*store_, *txn, true);
  // Operation log rows naming a dropped node go once past the dense recent past.
  const int64_t horizon = now_ns - std::chrono::nanoseconds(policy.keep_within).count();
  for (const NodeRecord& r : res.dropped) {
    AE_TRY(txn->DeleteNode(r));
    if (r.parent) AE_TRY(txn->RemoveChild(*r.parent, r.id));
    AE_TRY(refs.ReleaseNode(r.id, r.tree));
    AE_ASSIGN(uint64_t ops, txn->DropOperationsOf(r.id, horizon));
    res.operations_dropped += ops;
  }
  AE_TRY(txn->Commit());
  res.released = refs.stats().released;
  res.objects_read = refs.stats().objects_read;
  return res;
}

Result<bool> Repo::EnsureCounted(RefStats* stats) {
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(bool counted, txn->Counted());
  if (counted) {
    AE_ASSIGN(uint64_t applied, ApplyDeferred(*store_, *txn));
    if (applied) AE_TRY(txn->Commit());
    return false;
  }
  AE_ASSIGN(*stats, CountAll(*store_, *meta_, *txn, MetaDb::Txn::Counts::kLive));
  AE_TRY(txn->Commit());
  return true;
}

Result<void> Repo::CountDeferred() {
  AE_ASSIGN(WriteLock lock, Lock());
  RefStats counting;
  AE_TRY(EnsureCounted(&counting));
  return {};
}

Result<GcResult> Repo::Gc(const store::CompactOptions& compact, bool full) {
  GcResult res;
  {
    // Dropping must not interleave with a snapshot: it could deduplicate
    // against an object being dropped, or reference one again.
    AE_ASSIGN(WriteLock lock, Lock());
    RefStats counting;
    if (full) {
      AE_ASSIGN(auto txn, meta_->Begin());
      AE_ASSIGN(counting, CountAll(*store_, *meta_, *txn, MetaDb::Txn::Counts::kLive));
      AE_TRY(txn->Commit());
      res.counted = true;
    } else {
      AE_ASSIGN(res.counted, EnsureCounted(&counting));
    }
    res.objects_read = counting.objects_read;
    // Before dropping: content only a stale row named is garbage now.
    AE_ASSIGN(res.stale_cache_rows, DropStaleCacheRows());
    // Page by page: the store drops first, then the garbage rows go. A
    // crash in between leaves rows naming ids the store no longer has,
    // which the next gc skips; counts are never touched here.
    constexpr size_t kPage = 65536;
    BeginPhase(progress_, "dropping");
    for (;;) {
      AE_ASSIGN(std::vector<MetaDb::GarbageRow> rows, meta_->Garbage(kPage));
      if (rows.empty()) break;
      std::unordered_set<store::ObjectId, store::ObjectIdHash> seen;  // an id may have several rows
      AE_ASSIGN(auto batch, store_->BeginBatch());
      for (const MetaDb::GarbageRow& row : rows) {
        const store::ObjectId& id = row.id;
        if (!seen.insert(id).second) continue;
        // Referenced again since it reached 0 (a later snapshot), or the
        // empty tree, which diffs of root nodes read: kept.
        AE_ASSIGN(uint64_t n, meta_->RefCount(id));
        if (n || id == EmptyTreeId()) continue;
        auto info = store_->Stat(id);
        if (!info && info.error().code == ErrorCode::kNotFound) continue;
        if (!info) return Unexpected<Error>(info.error());
        ++res.dropped_objects;
        res.dropped_bytes += info->stored_size;
        Advance(progress_, 1, info->stored_size);
        AE_TRY(batch->Drop(id));
      }
      AE_TRY(batch->Commit());
      AE_ASSIGN(auto txn, meta_->Begin());
      for (const MetaDb::GarbageRow& row : rows) AE_TRY(txn->DeleteGarbage(row));
      AE_TRY(txn->Commit());
    }
    AE_ASSIGN(res.live_objects, meta_->CountedObjects());
  }
  BeginPhase(progress_, "compacting");
  uint64_t copied = 0;
  AE_ASSIGN(store::CompactResult c, store_->Compact(compact, [&](const store::CompactProgress& p) {
    if (!progress_) return;
    progress_->total_files.store(p.packs_total, std::memory_order_relaxed);
    progress_->Add(0, p.bytes_copied - copied);
    copied = p.bytes_copied;
  }));
  res.bytes_freed = c.bytes_freed;
  res.packs_rewritten = c.packs_rewritten;
  return res;
}

}  // namespace agentenv::snap
