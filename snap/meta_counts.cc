// The reference count tables of the metadata index (refcount, garbage,
// recount; see meta.h and snap/refcount.h).
#include <cstring>

#include "snap/meta.h"
#include "snap/meta_internal.h"

namespace agentenv::snap {

using meta_internal::BigEndian;
using meta_internal::CountOf;
using meta_internal::FromBigEndian;
using meta_internal::IdOf;
using meta_internal::kPendingBit;
using meta_internal::RawCount;
using meta_internal::Val;

Result<std::vector<MetaDb::GarbageRow>> MetaDb::Garbage(size_t limit) const {
  READ_TXN(t);
  std::vector<GarbageRow> out;
  for (MDB_dbi dbi : {garbage_, garbage_log_}) {
    MDB_cursor* c;
    MDB_TRY(dir_, mdb_cursor_open(t.txn, dbi, &c));
    MDB_val k, v;
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0 && out.size() < limit;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
      trim_->Tick();
      if (dbi == garbage_) out.push_back({IdOf(k), false, 0});
      else out.push_back({IdOf(v), true, FromBigEndian(k)});
    }
    mdb_cursor_close(c);
  }
  return out;
}

Result<uint64_t> MetaDb::RefCount(const store::ObjectId& id) const {
  READ_TXN(t);
  trim_->Tick();  // gc asks once per garbage row: random pages of the whole table
  MDB_val k = Val(id), v;
  int rc = mdb_get(t.txn, refcount_, &k, &v);
  if (rc == MDB_NOTFOUND) return uint64_t{0};
  MDB_TRY(dir_, rc);
  return CountOf(v);
}

Result<uint64_t> MetaDb::CountedObjects() const {
  READ_TXN(t);
  MDB_stat st;
  MDB_TRY(dir_, mdb_stat(t.txn, refcount_, &st));
  return uint64_t(st.ms_entries);
}

namespace {
constexpr std::string_view kCountedKey = "refcount";
// Version of the counting rules the refcount table follows (snap/refcount.h):
// "1": every reference is counted; "2": every one except those of the nodes
// in the deferred table. A binary older than deferral knows only "1", so it
// recounts a table marked "2" instead of trusting it; rows it leaves in the
// deferred table are stale once it has written "1".
constexpr std::string_view kCountedVersion = "1";
constexpr std::string_view kCountedDeferred = "2";
// next_seq as of the last node whose references were counted or deferred.
// A node made by a binary that does not keep it (older, or one that saw
// no counts) leaves it behind next_seq: the counts then miss that node, and
// Counted() says so until they are built again. Absent in a repository
// counted before it existed, which is trusted as it was.
constexpr std::string_view kCountedThroughKey = "counted_through";
}  // namespace

// The counted mark's value, empty when absent.
Result<std::string> MetaDb::Txn::CountedMark() {
  MDB_val k = Val(kCountedKey.data(), kCountedKey.size()), v;
  int rc = mdb_get(txn_, db_->info_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::string();
  MDB_TRY(db_->dir_, rc);
  return std::string(static_cast<const char*>(v.mv_data), v.mv_size);
}

Result<void> MetaDb::Txn::SetCountedMark(std::string_view mark) {
  MDB_val k = Val(kCountedKey.data(), kCountedKey.size()), v = Val(mark.data(), mark.size());
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->info_, &k, &v, 0));
  return {};
}

Result<void> MetaDb::Txn::SetCountedThrough(uint64_t next_seq) {
  MDB_val k = Val(kCountedThroughKey.data(), kCountedThroughKey.size()), v = Val(&next_seq, 8);
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->info_, &k, &v, 0));
  return {};
}

Result<void> MetaDb::Txn::DeferNode(uint64_t seq, const store::ObjectId& node, const store::ObjectId& tree) {
  AE_ASSIGN(std::string mark, CountedMark());
  if (mark != kCountedDeferred) {
    MDB_TRY(db_->dir_, mdb_drop(txn_, db_->deferred_, 0));  // stale rows, if any
    AE_TRY(SetCountedMark(kCountedDeferred));
  }
  AE_TRY(SetCountedThrough(seq + 1));
  uint8_t key[8], row[64];
  BigEndian(seq, key);  // rows sort oldest first
  std::memcpy(row, node.bytes.data(), 32);
  std::memcpy(row + 32, tree.bytes.data(), 32);
  MDB_val k = Val(key, sizeof key), v = Val(row, sizeof row);
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->deferred_, &k, &v, 0));
  return {};
}

Result<uint64_t> MetaDb::Txn::DeferredNodes() {
  AE_ASSIGN(std::string mark, CountedMark());
  if (mark != kCountedDeferred) return uint64_t{0};
  MDB_stat st;
  MDB_TRY(db_->dir_, mdb_stat(txn_, db_->deferred_, &st));
  return uint64_t(st.ms_entries);
}

Result<void> MetaDb::Txn::ForEachDeferred(
    const std::function<Result<void>(const store::ObjectId&, const store::ObjectId&)>& fn) {
  AE_ASSIGN(std::string mark, CountedMark());
  if (mark != kCountedDeferred) return {};
  // Collected first: fn writes to other tables of this transaction, and
  // there are at most a few dozen rows.
  std::vector<std::pair<store::ObjectId, store::ObjectId>> rows;
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->deferred_, &c));
  MDB_val k, v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
  for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    if (v.mv_size != 64) {
      mdb_cursor_close(c);
      return Fail(ErrorCode::kCorrupt, db_->dir_ + ": deferred reference row of " + std::to_string(v.mv_size) +
                                           " bytes, not 64 (fsck --repair recounts)");
    }
    auto* p = static_cast<const uint8_t*>(v.mv_data);
    rows.emplace_back(IdOf(Val(p, 32)), IdOf(Val(p + 32, 32)));
  }
  mdb_cursor_close(c);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  for (const auto& [node, tree] : rows) AE_TRY(fn(node, tree));
  return {};
}

Result<void> MetaDb::Txn::ClearDeferred() {
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->deferred_, 0));
  AE_ASSIGN(std::string mark, CountedMark());
  if (mark == kCountedDeferred) AE_TRY(SetCountedMark(kCountedVersion));
  return {};
}

Result<std::optional<MetaDb::Txn::RefRow>> MetaDb::Txn::AdjustRef(Counts table, const store::ObjectId& id,
                                                                  int64_t delta) {
  db_->trim_->Tick();
  MDB_dbi dbi = table == Counts::kLive ? db_->refcount_ : db_->recount_;
  MDB_val k = Val(id), v;
  uint64_t raw = 0;
  int rc = mdb_get(txn_, dbi, &k, &v);
  if (rc == 0) raw = RawCount(v);
  else if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  RefRow row{raw & ~kPendingBit, (raw & kPendingBit) != 0};
  if (delta < 0 && uint64_t(-delta) > row.count) return std::optional<RefRow>();
  row.count = uint64_t(int64_t(row.count) + delta);
  if (row.count == 0) {
    rc = mdb_del(txn_, dbi, &k, nullptr);
    if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  } else {
    uint64_t n = row.count | (row.pending ? kPendingBit : 0);
    MDB_val nv = Val(&n, 8);
    MDB_TRY(db_->dir_, mdb_put(txn_, dbi, &k, &nv, 0));
  }
  return std::optional<RefRow>(row);
}

Result<MetaDb::Txn::RefRow> MetaDb::Txn::GetRef(Counts table, const store::ObjectId& id) {
  db_->trim_->Tick();
  MDB_val k = Val(id), v;
  int rc = mdb_get(txn_, table == Counts::kLive ? db_->refcount_ : db_->recount_, &k, &v);
  if (rc == MDB_NOTFOUND) return RefRow{};
  MDB_TRY(db_->dir_, rc);
  return RefRow{CountOf(v), (RawCount(v) & kPendingBit) != 0};
}

Result<void> MetaDb::Txn::SetPending(Counts table, const store::ObjectId& id, bool pending) {
  MDB_dbi dbi = table == Counts::kLive ? db_->refcount_ : db_->recount_;
  MDB_val k = Val(id), v;
  MDB_TRY(db_->dir_, mdb_get(txn_, dbi, &k, &v));
  uint64_t n = CountOf(v) | (pending ? kPendingBit : 0);
  MDB_val nv = Val(&n, 8);
  MDB_TRY(db_->dir_, mdb_put(txn_, dbi, &k, &nv, 0));
  return {};
}

Result<void> MetaDb::Txn::ClearCounts(Counts table) {
  if (table == Counts::kRecount) {
    MDB_TRY(db_->dir_, mdb_drop(txn_, db_->recount_, 0));
    return {};
  }
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->refcount_, 0));
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->garbage_, 0));
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->garbage_log_, 0));
  garbage_next_ = 0;
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->deferred_, 0));
  MDB_val k = Val(kCountedKey.data(), kCountedKey.size());
  int rc = mdb_del(txn_, db_->info_, &k, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return {};
}

Result<void> MetaDb::Txn::CompareCounts(
    Txn& recount, const std::function<Result<void>(const store::ObjectId&, uint64_t, uint64_t)>& fn) {
  MDB_cursor *a, *b;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->refcount_, &a));
  if (int rc = mdb_cursor_open(recount.txn_, recount.db_->recount_, &b); rc != 0) {
    mdb_cursor_close(a);
    MDB_TRY(db_->dir_, rc);
  }
  MDB_val ka, va, kb, vb;
  int ra = mdb_cursor_get(a, &ka, &va, MDB_FIRST), rb = mdb_cursor_get(b, &kb, &vb, MDB_FIRST);
  Result<void> err;
  // A merge of two id-ordered tables: memory stays constant.
  while (err && (ra == 0 || rb == 0)) {
    db_->trim_->Tick();
    if (recount.db_ != db_) recount.db_->trim_->Tick();
    int cmp = ra != 0 ? 1 : rb != 0 ? -1 : std::memcmp(ka.mv_data, kb.mv_data, 32);
    if (cmp < 0) {
      err = fn(IdOf(ka), CountOf(va), 0);
      ra = mdb_cursor_get(a, &ka, &va, MDB_NEXT);
    } else if (cmp > 0) {
      err = fn(IdOf(kb), 0, CountOf(vb));
      rb = mdb_cursor_get(b, &kb, &vb, MDB_NEXT);
    } else {
      if (CountOf(va) != CountOf(vb)) err = fn(IdOf(ka), CountOf(va), CountOf(vb));
      ra = mdb_cursor_get(a, &ka, &va, MDB_NEXT);
      rb = mdb_cursor_get(b, &kb, &vb, MDB_NEXT);
    }
  }
  mdb_cursor_close(a);
  mdb_cursor_close(b);
  return err;
}

Result<void> MetaDb::Txn::ForEachCounted(Counts table,
                                         const std::function<Result<void>(const store::ObjectId&)>& fn) {
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, table == Counts::kLive ? db_->refcount_ : db_->recount_, &c));
  MDB_val k, v;
  Result<void> err;
  int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
  for (; rc == 0 && err; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    db_->trim_->Tick();
    err = fn(IdOf(k));
  }
  mdb_cursor_close(c);
  if (err && rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return err;
}

Result<bool> MetaDb::Txn::Counted() {
  AE_ASSIGN(std::string mark, CountedMark());
  if (mark != kCountedVersion && mark != kCountedDeferred) return false;
  MDB_val k = Val(kCountedThroughKey.data(), kCountedThroughKey.size()), v;
  int rc = mdb_get(txn_, db_->info_, &k, &v);
  if (rc == MDB_NOTFOUND) return true;
  MDB_TRY(db_->dir_, rc);
  uint64_t through = 0;
  if (v.mv_size == 8) std::memcpy(&through, v.mv_data, 8);
  AE_ASSIGN(uint64_t next, PeekSeq());
  return through == next;
}

Result<void> MetaDb::Txn::SetCounted() {
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->deferred_, 0));  // every node is counted now
  AE_ASSIGN(uint64_t next, PeekSeq());
  AE_TRY(SetCountedThrough(next));
  return SetCountedMark(kCountedVersion);
}

Result<void> MetaDb::Txn::PutGarbage(const store::ObjectId& id) {
  // Appended, not keyed by id: a restore that changes every file releases
  // as many random ids, and rows keyed by them dirtied a page of the table
  // per few rows (42 MB of a 1M-file restore's 111 MB of dirty pages);
  // appended rows fill the last page only. An id released twice gets two
  // rows; gc drops it once.
  if (!garbage_next_) {
    MDB_cursor* c;
    MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->garbage_log_, &c));
    MDB_val k, v;
    int rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
    mdb_cursor_close(c);
    if (rc != 0 && rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
    garbage_next_ = rc == 0 ? FromBigEndian(k) + 1 : 0;
  }
  uint8_t key[8];
  BigEndian((*garbage_next_)++, key);
  MDB_val k = Val(key, 8), v = Val(id);
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->garbage_log_, &k, &v, MDB_APPEND));
  return {};
}

Result<void> MetaDb::Txn::DeleteGarbage(const GarbageRow& row) {
  db_->trim_->Tick();
  uint8_t key[8];
  BigEndian(row.seq, key);
  MDB_val k = row.logged ? Val(key, 8) : Val(row.id);
  int rc = mdb_del(txn_, row.logged ? db_->garbage_log_ : db_->garbage_, &k, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return {};
}

}  // namespace agentenv::snap
