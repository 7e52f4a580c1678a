// Reference counting of stored objects (see refcount.h).
#include "snap/refcount.h"

#include <algorithm>
#include <optional>

#include "store/manifest.h"

namespace agentenv::snap {

RefCounter::RefCounter(const store::Store& store, MetaDb::Txn& txn, bool enabled, MetaDb::Txn::Counts table,
                       TreeLoader load)
    : store_(store), txn_(txn), enabled_(enabled), table_(table), load_(std::move(load)) {
  if (!load_) load_ = [this](const store::ObjectId& id) { return LoadTree(store_, id); };
}

namespace {
bool HasChildren(store::ObjectType t) { return t == store::ObjectType::kTree || t == store::ObjectType::kManifest; }
}  // namespace

Result<void> RefCounter::Children(
    const store::ObjectId& id, store::ObjectType type,
    const std::function<Result<void>(const store::ObjectId&, store::ObjectType)>& fn) {
  ++stats_.objects_read;
  if (type == store::ObjectType::kTree) {
    AE_ASSIGN(Tree t, load_(id));
    for (const Entry& e : t) {
      if (e.kind == Kind::kDir) AE_TRY(fn(e.id, store::ObjectType::kTree));
      else if (e.kind == Kind::kFile) AE_TRY(fn(e.id, e.content));
    }
    return {};
  }
  AE_ASSIGN(auto bytes, store_.Get(id));
  AE_ASSIGN(auto chunks, store::DecodeManifest(bytes));
  for (const auto& c : chunks) AE_TRY(fn(c.id, store::ObjectType::kChunk));
  return {};
}

Result<void> RefCounter::CountChildren(const store::ObjectId& id, store::ObjectType type, bool pending) {
  // A missing object (lost from a damaged node, see fsck --repair) cannot
  // be opened: it stays pending until it is stored again and referenced.
  AE_ASSIGN(bool has, store_.Has(id));
  if (!has) return pending ? Result<void>() : txn_.SetPending(table_, id, true);
  if (pending) AE_TRY(txn_.SetPending(table_, id, false));
  return Children(id, type, [this](const store::ObjectId& c, store::ObjectType t) { return Add(c, t); });
}

Result<void> RefCounter::Add(const store::ObjectId& id, store::ObjectType type) {
  AE_ASSIGN(auto row, txn_.AdjustRef(table_, id, +1));
  // 0 -> 1: the object's own references start to count (again); those of
  // a pending object count as soon as it can be read.
  if (!HasChildren(type) || (row->count != 1 && !row->pending)) return {};
  return CountChildren(id, type, row->pending);
}

Result<void> RefCounter::Release(const store::ObjectId& id, store::ObjectType type) {
  AE_ASSIGN(auto row, txn_.AdjustRef(table_, id, -1));
  // Below zero: the table undercounts this id. Releasing its children or
  // calling it garbage could drop something live; leave it to fsck.
  if (!row || row->count != 0) return {};
  ++stats_.released;
  if (table_ == MetaDb::Txn::Counts::kLive) AE_TRY(txn_.PutGarbage(id));
  if (!HasChildren(type) || row->pending) return {};  // its children were never counted
  AE_ASSIGN(bool has, store_.Has(id));
  if (!has) return {};  // lost since it was counted: its children leak, nothing undercounts
  return Children(id, type, [this](const store::ObjectId& c, store::ObjectType t) { return Release(c, t); });
}

Result<void> RefCounter::Heal(const store::ObjectId& id, store::ObjectType type) {
  if (!enabled_ || !HasChildren(type)) return {};
  AE_ASSIGN(auto row, txn_.GetRef(table_, id));
  if (row.count == 0 || !row.pending) return {};
  return CountChildren(id, type, true);
}

Result<void> RefCounter::AddNode(const store::ObjectId& node, const store::ObjectId& tree) {
  if (!enabled_) return {};
  AE_TRY(Add(node, store::ObjectType::kNode));
  return Add(tree, store::ObjectType::kTree);
}

Result<void> RefCounter::DeferNode(uint64_t seq, const store::ObjectId& node, const store::ObjectId& tree) {
  if (!enabled_) return {};
  return txn_.DeferNode(seq, node, tree);
}

Result<void> RefCounter::ReleaseNode(const store::ObjectId& node, const store::ObjectId& tree) {
  if (!enabled_) return {};
  AE_TRY(Release(node, store::ObjectType::kNode));
  return Release(tree, store::ObjectType::kTree);
}

Result<void> RefCounter::AddContent(const store::FileRef& f) {
  if (!enabled_) return {};
  return Add(f.id, f.type);
}

Result<void> RefCounter::ReleaseContent(const store::FileRef& f) {
  if (!enabled_) return {};
  return Release(f.id, f.type);
}

Result<void> RefCounter::PutStat(std::string_view path, const StatEntry& e) {
  if (enabled_) {
    AE_ASSIGN(auto old, txn_.GetStat(path));
    if (!old || old->ref.id != e.ref.id) {
      // Add before releasing: content moving between entries never passes 0.
      AE_TRY(Add(e.ref.id, e.ref.type));
      if (old) AE_TRY(Release(old->ref.id, old->ref.type));
    }
  }
  return txn_.PutStat(path, e);
}

Result<void> RefCounter::DeleteStat(std::string_view path) {
  AE_ASSIGN(auto old, txn_.GetStat(path));
  if (!old) return {};
  if (enabled_) AE_TRY(Release(old->ref.id, old->ref.type));
  return txn_.DeleteStat(path);
}

Result<uint64_t> RefCounter::ClearStats() {
  if (enabled_) AE_TRY(txn_.ForEachStat([this](const StatEntry& e) { return Release(e.ref.id, e.ref.type); }));
  return txn_.ClearStats();
}

Result<uint64_t> ApplyDeferred(const store::Store& store, MetaDb::Txn& txn, TreeLoader load) {
  RefCounter rc(store, txn, true, MetaDb::Txn::Counts::kLive, std::move(load));
  uint64_t n = 0;
  AE_TRY(txn.ForEachDeferred([&](const store::ObjectId& node, const store::ObjectId& tree) {
    ++n;
    return rc.AddNode(node, tree);
  }));
  AE_TRY(txn.ClearDeferred());
  return n;
}

Result<RefStats> CountInto(const store::Store& store, const MetaDb& meta, MetaDb& into, MetaDb::Txn::Counts table,
                           const std::unordered_set<store::ObjectId, store::ObjectIdHash>& except) {
  RefStats total;
  std::unique_ptr<MetaDb::Txn> txn;
  std::optional<RefCounter> rc;
  uint64_t in_txn = 0;
  auto open = [&]() -> Result<void> {
    if (txn) return {};
    AE_ASSIGN(txn, into.Begin());
    rc.emplace(store, *txn, true, table);
    return {};
  };
  auto commit = [&]() -> Result<void> {
    if (!txn) return {};
    AE_TRY(txn->Commit());
    total.objects_read += rc->stats().objects_read;
    total.released += rc->stats().released;
    rc.reset();
    txn.reset();
    in_txn = 0;
    return {};
  };
  // Pages of records, each read in a transaction of its own: no read
  // transaction stays open while the counts are written.
  for (uint64_t next = 0;;) {
    AE_ASSIGN(std::vector<NodeRecord> page, meta.NodesFrom(next, 1024));
    if (page.empty()) break;
    for (const NodeRecord& r : page) {
      next = r.seq + 1;
      if (except.count(r.id)) continue;
      AE_TRY(open());
      AE_TRY(rc->AddNode(r.id, r.tree));
      if (++in_txn >= kCountChunk) AE_TRY(commit());
    }
  }
  AE_TRY(commit());
  Result<void> err;
  AE_TRY(meta.ForEachStat([&](const StatEntry& e) {
    if (!err) return;
    err = open();
    if (err) err = rc->AddContent(e.ref);
    if (err && ++in_txn >= kCountChunk * 64) err = commit();
  }));
  AE_TRY(err);
  AE_TRY(commit());
  return total;
}

Result<RefStats> RebuildCounts(const store::Store& store, MetaDb& meta) {
  {
    AE_ASSIGN(auto txn, meta.Begin());
    AE_TRY(txn->ClearCounts(MetaDb::Txn::Counts::kLive));
    AE_TRY(txn->Commit());
  }
  AE_ASSIGN(RefStats stats, CountInto(store, meta, meta, MetaDb::Txn::Counts::kLive));
  AE_ASSIGN(auto txn, meta.Begin());
  AE_TRY(store.ForEach([&](const store::ObjectId& id, const store::ObjectInfo&) -> Result<void> {
    AE_ASSIGN(auto row, txn->GetRef(MetaDb::Txn::Counts::kLive, id));
    if (row.count == 0 && id != EmptyTreeId()) AE_TRY(txn->PutGarbage(id));
    return {};
  }));
  AE_TRY(txn->SetCounted());
  AE_TRY(txn->Commit());
  return stats;
}

}  // namespace agentenv::snap
