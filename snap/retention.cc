// Repo::Retain and Repo::Gc (see repo.h).
#include <algorithm>
#include <chrono>
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

namespace {

// Which nodes a policy keeps, decided one node at a time in creation order
// with bounded state: the slots already taken (one per time window of a
// bucket: bounded by the time history spans, not by its nodes).
class Plan {
 public:
  // keep_from: the seq of the oldest of the keep_last newest nodes.
  Plan(const RetentionPolicy& p, int64_t now_ns, uint64_t keep_from) : p_(p), now_(now_ns), keep_from_(keep_from) {}

  // Whether node r, which has `children` children (counted up to 2) and
  // is named by HEAD, a tag or a lease when `guarded`, stays. Deciding a
  // node again gives the same answer.
  bool Keeps(const NodeRecord& r, size_t children, bool guarded) {
    const int64_t age = now_ - r.time_ns;
    if (!r.parent || children != 1 || (r.flags & NodeRecord::kPinned) || r.seq >= keep_from_ ||
        age < std::chrono::nanoseconds(p_.keep_within).count())
      return true;
    for (size_t b = 0; b < p_.buckets.size(); ++b) {
      if (age >= std::chrono::nanoseconds(p_.buckets[b].until).count()) continue;
      const int64_t width = std::chrono::nanoseconds(p_.buckets[b].width).count();
      // The oldest node of a slot (the first to come) is the one kept.
      auto [it, fresh] = slots_.try_emplace({b, r.time_ns / width}, r.seq);
      return guarded || it->second == r.seq;
    }
    return guarded;
  }

 private:
  const RetentionPolicy& p_;
  const int64_t now_;
  const uint64_t keep_from_;
  std::map<std::pair<size_t, int64_t>, uint64_t> slots_;  // (bucket, window) -> seq of its kept node
};

// A run of dropped nodes below the kept node `anchor`, one line of descent
// (each dropped node has one child); `next`: the child of its newest node.
struct DroppedSpan {
  store::ObjectId anchor, next;
  Thinned thinned;
};

}  // namespace

Result<void> Repo::Reparent(MetaDb::Txn& txn, NodeRecord r, const store::ObjectId& np, Thinned thinned) {
  Provenance prov = r.provenance.value_or(Provenance{});
  if (prov.thinned) AppendThinned(thinned, *prov.thinned);  // an earlier thinning, newer than this span
  prov.thinned = std::move(thinned);
  r.provenance = Bounded(std::move(prov));
  AE_ASSIGN(std::optional<NodeRecord> parent, txn.GetNode(np));
  const store::ObjectId from = parent ? parent->tree : EmptyTreeId();
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
  AE_TRY(txn.PutNode(r));
  return txn.AddChild(np, r.id);
}

Result<RetentionResult> Repo::Retain(const RetentionPolicy& policy, bool dry_run, int64_t now_ns) {
  AE_ASSIGN(WriteLock lock, Lock());
  RetentionResult res;
  // The keep_last newest nodes: those from this seq on.
  uint64_t keep_from = policy.keep_last ? 0 : UINT64_MAX, seen = 0;
  if (policy.keep_last) {
    AE_TRY(meta_->ForEachRecent([&](const NodeRecord& r) -> Result<bool> {
      keep_from = r.seq;
      return ++seen < policy.keep_last;
    }));
  }
  Plan plan(policy, now_ns, keep_from);
  // Operation log rows naming a dropped node go once past the dense recent past.
  const int64_t horizon = now_ns - std::chrono::nanoseconds(policy.keep_within).count();
  std::unordered_map<store::ObjectId, DroppedSpan, store::ObjectIdHash> spans;  // by their newest dropped node
  std::unordered_set<store::ObjectId, store::ObjectIdHash> carried;     // reparented when a transaction ended
  bool counted = dry_run;
  uint64_t next = 0;  // the seq of the next node to decide
  for (bool done = false; !done;) {
    AE_ASSIGN(auto txn, meta_->Begin());
    // What HEAD, tags and leases name stays: read in the transaction that
    // drops, so a lease taken meanwhile keeps its node.
    std::unordered_set<store::ObjectId, store::ObjectIdHash> guarded;
    for (const char* prefix : {"HEAD", "tag/", kLeasePrefix}) {
      AE_ASSIGN(auto refs, txn->ListRefs(prefix));
      for (const auto& [name, id] : refs) guarded.insert(id);
    }
    RefCounter refs(*store_, *txn, true);
    uint64_t dropped_here = 0, decided_here = 0;
    bool recount = false;
    const uint64_t chunk = std::max<uint64_t>(1, policy.drops_per_commit);
    while (!done && !recount && dropped_here < chunk && decided_here < 16 * chunk) {
      AE_ASSIGN(std::vector<NodeRecord> page, txn->NodesFrom(next, 256));
      done = page.empty();
      for (const NodeRecord& r : page) {
        AE_ASSIGN(auto children, txn->Children(r.id, 2));
        if (plan.Keeps(r, children.size(), guarded.count(r.id))) {
          ++res.kept;
          bool moved = carried.erase(r.id) > 0;
          if (auto s = r.parent ? spans.find(*r.parent) : spans.end(); s != spans.end()) {
            AE_TRY(Reparent(*txn, r, s->second.anchor, std::move(s->second.thinned)));
            spans.erase(s);
            moved = true;
          }
          res.reparented += moved;
        } else {
          if (!counted) {
            // The first node to drop: its references are released from
            // counts, which must be built first (nothing is written yet).
            recount = true;
            break;
          }
          carried.erase(r.id);
          ++res.dropped_nodes;
          if (res.dropped.size() < RetentionResult::kDroppedSample) res.dropped.push_back(r);
          if (!dry_run) {
            DroppedSpan span;
            if (auto s = spans.find(*r.parent); s != spans.end()) {
              span = std::move(s->second);
              spans.erase(s);
            } else {
              span.anchor = *r.parent;
            }
            ThinNode(span.thinned, r.time_ns, r.provenance);
            span.next = children.front();
            spans.emplace(r.id, std::move(span));
            AE_TRY(txn->DeleteNode(r));
            AE_TRY(txn->RemoveChild(*r.parent, r.id));
            AE_TRY(refs.ReleaseNode(r.id, r.tree));
            AE_ASSIGN(uint64_t ops, txn->DropOperationsOf(r.id, horizon));
            res.operations_dropped += ops;
            ++dropped_here;
          }
        }
        next = r.seq + 1;
        ++decided_here;
      }
    }
    if (recount) {
      txn.reset();
      RefStats counting;
      AE_TRY(EnsureCounted(&counting));
      counted = true;
      continue;
    }
    if (dry_run) continue;  // nothing to commit
    // A span still being dropped: its next node (dropped by a later
    // transaction, or kept) takes the span's kept ancestor as parent and
    // carries its summary, so history is whole at every commit.
    for (auto& [last, span] : spans) {
      AE_ASSIGN(std::optional<NodeRecord> carrier, txn->GetNode(span.next));
      if (!carrier) return Fail(ErrorCode::kCorrupt, "retain: node " + span.next.Hex() + ", child of a dropped node, is not in history");
      AE_TRY(Reparent(*txn, std::move(*carrier), span.anchor, std::move(span.thinned)));
      carried.insert(span.next);
    }
    spans.clear();
    AE_TRY(txn->Commit());
    res.released += refs.stats().released;
    res.objects_read += refs.stats().objects_read;
  }
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
  txn.reset();
  AE_ASSIGN(*stats, RebuildCounts(*store_, *meta_));
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
      AE_ASSIGN(counting, RebuildCounts(*store_, *meta_));
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
    constexpr size_t kPage = 8192;  // a batch dirties up to a store index page per id: 32 MB at most
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
