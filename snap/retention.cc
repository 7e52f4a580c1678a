// Repo::Retain and Repo::Gc (see repo.h).
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "snap/diff.h"
#include "snap/repo.h"
#include "store/manifest.h"

namespace agentenv::snap {
namespace {

using IdSet = std::unordered_set<store::ObjectId, store::ObjectIdHash>;

// Adds tree `id` and everything it reaches to `live`; shared subtrees are
// walked once. `damaged`: the node is marked damaged, so objects it lost
// are skipped instead of failing the whole gc.
Result<void> MarkTree(const store::Store& s, const store::ObjectId& id, IdSet& live, bool damaged) {
  if (!live.insert(id).second) return {};
  if (damaged) {
    AE_ASSIGN(bool has, s.Has(id));
    if (!has) return {};
  }
  AE_ASSIGN(Tree t, LoadTree(s, id));
  for (const Entry& e : t) {
    if (e.kind == Kind::kDir) {
      AE_TRY(MarkTree(s, e.id, live, damaged));
    } else if (e.kind == Kind::kFile && live.insert(e.id).second && e.content == store::ObjectType::kManifest) {
      if (damaged) {
        AE_ASSIGN(bool has, s.Has(e.id));
        if (!has) continue;
      }
      AE_ASSIGN(auto bytes, s.Get(e.id));
      AE_ASSIGN(auto chunks, store::DecodeManifest(bytes));
      for (const auto& c : chunks) live.insert(c.id);
    }
  }
  return {};
}

}  // namespace

Result<RetentionResult> Repo::Retain(const RetentionPolicy& policy, bool dry_run, int64_t now_ns) {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(std::vector<NodeRecord> nodes, meta_->AllNodes());
  AE_ASSIGN(auto head, meta_->GetRef("HEAD"));
  AE_ASSIGN(auto tags, meta_->ListRefs("tag/"));
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

  // Reparent survivors whose parent goes, recomputing their summaries.
  auto survivor = [&](std::optional<store::ObjectId> p) {
    while (p && !keep[index.at(*p)]) p = nodes[index.at(*p)].parent;
    return p;
  };
  AE_ASSIGN(auto txn, meta_->Begin());
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeRecord r = nodes[i];
    if (!keep[i] || !r.parent || keep[index.at(*r.parent)]) continue;
    std::optional<store::ObjectId> np = survivor(r.parent);
    AE_ASSIGN(TreeDelta d, Delta(*store_, np ? nodes[index.at(*np)].tree : EmptyTreeId(), r.tree));
    AE_ASSIGN(Node n, LoadNode(*store_, r.id));
    r.parent = np;
    r.changes = d.changes.size();
    if (n.message.empty() && !n.label.starts_with("exec: ")) r.title = SummaryLabel(d.changes).substr(0, 200);
    AE_TRY(txn->PutNode(r));
    if (np) AE_TRY(txn->AddChild(*np, r.id));
    ++res.reparented;
  }
  for (const NodeRecord& r : res.dropped) {
    AE_TRY(txn->DeleteNode(r));
    if (r.parent) AE_TRY(txn->RemoveChild(*r.parent, r.id));
  }
  AE_TRY(txn->Commit());
  return res;
}

Result<GcResult> Repo::Gc(const store::CompactOptions& compact) {
  GcResult res;
  {
    // Marking and dropping must not interleave with a snapshot: it could
    // deduplicate against an object we are about to drop.
    AE_ASSIGN(WriteLock lock, Lock());
    IdSet live;
    AE_ASSIGN(std::vector<NodeRecord> nodes, meta_->AllNodes());
    for (const NodeRecord& r : nodes) {
      live.insert(r.id);
      AE_TRY(MarkTree(*store_, r.tree, live, r.damaged()));
    }
    live.insert(EmptyTreeId());
    Result<void> mark_stats;
    AE_TRY(meta_->ForEachStat([&](const StatEntry& e) {
      if (!live.insert(e.ref.id).second || e.ref.type != store::ObjectType::kManifest || !mark_stats) return;
      auto bytes = store_->Get(e.ref.id);
      auto chunks = bytes ? store::DecodeManifest(*bytes) : Unexpected<Error>(bytes.error());
      if (!chunks) {
        mark_stats = Unexpected<Error>(chunks.error());
        return;
      }
      for (const auto& c : *chunks) live.insert(c.id);
    }));
    AE_TRY(mark_stats);
    res.live_objects = live.size();
    AE_ASSIGN(auto batch, store_->BeginBatch());
    AE_TRY(store_->ForEach([&](const store::ObjectId& id, const store::ObjectInfo& info) -> Result<void> {
      if (live.count(id)) return {};
      ++res.dropped_objects;
      res.dropped_bytes += info.stored_size;
      return batch->Drop(id);
    }));
    AE_TRY(batch->Commit());
  }
  AE_ASSIGN(store::CompactResult c, store_->Compact(compact));
  res.bytes_freed = c.bytes_freed;
  res.packs_rewritten = c.packs_rewritten;
  return res;
}

}  // namespace agentenv::snap
