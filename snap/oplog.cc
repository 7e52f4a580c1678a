// The operation log: its row codec and the metadata index's oplog and
// oplog_nodes tables (see oplog.h, meta.h, docs/meta-format.md).
#include "snap/oplog.h"

#include <array>
#include <cstring>
#include <functional>

#include "snap/fields.h"
#include "snap/meta.h"
#include "snap/meta_internal.h"

namespace agentenv::snap {

using meta_internal::Val;

namespace {

constexpr std::array<std::string_view, 6> kOpKindNames = {"unknown",          "restore", "partial_restore",
                                                          "tournament_apply", "bisect",  "repair"};

// An operation row's field tags (docs/meta-format.md).
enum Tag : uint64_t {
  kKind = 1, kFrom = 2, kTo = 3, kSaved = 4, kOrigin = 5, kClient = 6, kSession = 7, kTournament = 8,
};

std::span<const uint8_t> Span(const MDB_val& v) { return {static_cast<const uint8_t*>(v.mv_data), v.mv_size}; }

}  // namespace

std::string_view OpKindName(OpKind k) {
  auto i = size_t(k);
  return i < kOpKindNames.size() ? kOpKindNames[i] : kOpKindNames[0];
}

std::optional<OpKind> OpKindFromName(std::string_view name) {
  for (size_t i = 0; i < kOpKindNames.size(); ++i)
    if (kOpKindNames[i] == name) return OpKind(i);
  return std::nullopt;
}

void OperationKey(int64_t ns, uint8_t out[8]) {
  uint64_t v = uint64_t(ns) ^ (uint64_t{1} << 63);  // the sign bit flipped: negative times sort first
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = uint8_t(v);
}

int64_t OperationTime(std::span<const uint8_t> key) {
  uint64_t v = 0;
  for (size_t i = 0; i < key.size() && i < 8; ++i) v = v << 8 | key[i];
  return int64_t(v ^ (uint64_t{1} << 63));
}

std::vector<uint8_t> EncodeOperation(const Operation& op) {
  fields::Writer w;
  if (op.kind != OpKind::kUnknown) w.Var(kKind, uint64_t(op.kind));
  if (op.from) w.Id(kFrom, *op.from);
  w.Id(kTo, op.to);
  if (op.saved) w.Id(kSaved, *op.saved);
  if (op.who.origin != Origin::kUnknown) w.Var(kOrigin, uint64_t(op.who.origin));
  if (!op.who.client.empty()) w.Str(kClient, CutUtf8(op.who.client, Provenance::kMaxName));
  if (!op.who.session.empty()) w.Str(kSession, CutUtf8(op.who.session, Provenance::kMaxName));
  if (!op.tournament.empty()) w.Str(kTournament, CutUtf8(op.tournament, Provenance::kMaxName));
  return std::move(w).bytes();
}

Result<Operation> DecodeOperation(int64_t time_ns, std::span<const uint8_t> bytes, std::string_view what) {
  Operation op;
  op.time_ns = time_ns;
  ByteReader r(bytes);
  fields::Seen seen;
  uint64_t tag, n = 0;
  std::span<const uint8_t> v;
  bool bad = false, has_to = false;
  while (fields::Next(r, &tag, &v, &bad)) {
    if (tag <= kTournament && !seen.First(tag)) bad = true;
    bool ok = !bad;
    switch (tag) {
      case kKind:
        ok = ok && fields::AsVar(v, &n) && n <= UINT32_MAX;
        op.kind = OpKind(n);
        break;
      case kFrom: ok = ok && fields::AsId(v, &op.from.emplace()); break;
      case kTo: ok = ok && (has_to = fields::AsId(v, &op.to)); break;
      case kSaved: ok = ok && fields::AsId(v, &op.saved.emplace()); break;
      case kOrigin:
        ok = ok && fields::AsVar(v, &n) && n <= UINT32_MAX;
        op.who.origin = Origin(n);
        break;
      case kClient: ok = ok && fields::AsStr(v, Provenance::kMaxName, &op.who.client); break;
      case kSession: ok = ok && fields::AsStr(v, Provenance::kMaxName, &op.who.session); break;
      case kTournament: ok = ok && fields::AsStr(v, Provenance::kMaxName, &op.tournament); break;
      default: break;  // a newer writer's field
    }
    if (!ok) {
      bad = true;
      break;
    }
  }
  if (bad || !has_to) return Fail(ErrorCode::kCorrupt, std::string(what) + ": bad operation row");
  return op;
}

// ---- the tables

namespace {

// Walks the oplog from where `rc` (the positioning get's result) left c by
// `step`, collecting up to `limit` rows while `in_range` holds. Closes c.
Result<void> CollectOps(const std::string& dir, MDB_cursor* c, int rc, MDB_cursor_op step, size_t limit,
                        const std::function<bool(int64_t)>& in_range, std::vector<Operation>& out) {
  MDB_val k, v;
  if (rc == 0) rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
  Result<void> err;
  for (; rc == 0 && out.size() < limit; rc = mdb_cursor_get(c, &k, &v, step)) {
    int64_t t = OperationTime(Span(k));
    if (!in_range(t)) break;
    auto op = DecodeOperation(t, Span(v), dir);
    if (!op) {
      err = Unexpected<Error>(op.error());
      break;
    }
    out.push_back(std::move(*op));
  }
  mdb_cursor_close(c);
  return err;
}

}  // namespace

Result<std::vector<Operation>> MetaDb::Operations(int64_t from_ns, int64_t to_ns, size_t limit) const {
  READ_TXN(t);
  std::vector<Operation> out;
  if (from_ns >= to_ns || limit == 0) return out;
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, oplog_, &c));
  uint8_t key[8];
  OperationKey(from_ns, key);
  MDB_val k = Val(key, 8), v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  AE_TRY(CollectOps(dir_, c, rc, MDB_NEXT, limit, [&](int64_t at) { return at < to_ns; }, out));
  return out;
}

Result<std::vector<Operation>> MetaDb::RecentOperations(size_t limit, std::optional<int64_t> before_ns) const {
  READ_TXN(t);
  std::vector<Operation> out;
  if (limit == 0) return out;
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, oplog_, &c));
  MDB_val k, v;
  int rc;
  uint8_t key[8];
  if (!before_ns) {
    rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
  } else {
    OperationKey(*before_ns, key);
    k = Val(key, 8);
    rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    rc = rc == 0 ? mdb_cursor_get(c, &k, &v, MDB_PREV) : mdb_cursor_get(c, &k, &v, MDB_LAST);
  }
  AE_TRY(CollectOps(dir_, c, rc, MDB_PREV, limit, [](int64_t) { return true; }, out));
  return out;
}

Result<uint64_t> MetaDb::OperationCount() const {
  READ_TXN(t);
  MDB_stat st;
  MDB_TRY(dir_, mdb_stat(t.txn, oplog_, &st));
  return uint64_t(st.ms_entries);
}

Result<int64_t> MetaDb::Txn::PutOperation(const Operation& op) {
  std::vector<uint8_t> row = EncodeOperation(op);
  int64_t at = op.time_ns;
  uint8_t key[8];
  for (;; ++at) {
    OperationKey(at, key);
    MDB_val k = Val(key, 8), v = Val(row.data(), row.size());
    int rc = mdb_put(txn_, db_->oplog_, &k, &v, MDB_NOOVERWRITE);
    if (rc == 0) break;
    if (rc != MDB_KEYEXIST) MDB_TRY(db_->dir_, rc);
  }
  // The index retention finds a dropped node's rows by.
  for (const std::optional<store::ObjectId>& id : {op.from, std::optional(op.to), op.saved}) {
    if (!id) continue;
    MDB_val k = Val(*id), v = Val(key, 8);
    int rc = mdb_put(txn_, db_->oplog_nodes_, &k, &v, MDB_NODUPDATA);
    if (rc != MDB_KEYEXIST) MDB_TRY(db_->dir_, rc);
  }
  return at;
}

Result<uint64_t> MetaDb::Txn::DropOperationsOf(const store::ObjectId& node, int64_t older_than_ns) {
  std::vector<std::array<uint8_t, 8>> keys;
  {
    MDB_cursor* c;
    MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->oplog_nodes_, &c));
    MDB_val k = Val(node), v;
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP)) {
      if (v.mv_size != 8) continue;
      auto& key = keys.emplace_back();
      std::memcpy(key.data(), v.mv_data, 8);
    }
    mdb_cursor_close(c);
  }
  MDB_val nk = Val(node);
  int rc = mdb_del(txn_, db_->oplog_nodes_, &nk, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  uint64_t dropped = 0;
  for (auto& key : keys) {
    int64_t at = OperationTime(key);
    if (at >= older_than_ns) continue;
    MDB_val k = Val(key.data(), 8), v;
    rc = mdb_get(txn_, db_->oplog_, &k, &v);
    if (rc == MDB_NOTFOUND) continue;
    MDB_TRY(db_->dir_, rc);
    // A row that does not decode names no node it can be found by again:
    // it goes all the same.
    auto op = DecodeOperation(at, Span(v), db_->dir_);
    MDB_TRY(db_->dir_, mdb_del(txn_, db_->oplog_, &k, nullptr));
    ++dropped;
    if (!op) continue;
    for (const std::optional<store::ObjectId>& id : {op->from, std::optional(op->to), op->saved}) {
      if (!id || *id == node) continue;
      MDB_val ik = Val(*id), iv = Val(key.data(), 8);
      rc = mdb_del(txn_, db_->oplog_nodes_, &ik, &iv);
      if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
    }
  }
  return dropped;
}

}  // namespace agentenv::snap
