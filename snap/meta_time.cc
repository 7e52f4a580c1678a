// The time index of the metadata index: tables time, timeline and lanes
// (see time_index.h, meta.h, docs/meta-format.md).
#include <algorithm>
#include <cstring>

#include "snap/meta.h"
#include "snap/meta_internal.h"
#include "snap/varint.h"

namespace agentenv::snap {

using meta_internal::BigEndian;
using meta_internal::DecodeRecord;
using meta_internal::FromBigEndian;
using meta_internal::IdOf;
using meta_internal::Val;

namespace {

using u128 = unsigned __int128;
constexpr uint64_t kSignBit = uint64_t{1} << 63;
constexpr std::string_view kTimeNextKey = "time_next", kTimeNodesKey = "time_nodes", kNextSeqKey = "next_seq";
// Pending summary rows of one transaction written out past this many.
constexpr size_t kMaxPendingSums = 16384;

// Times as unsigned numbers that sort as the signed times do.
uint64_t U(int64_t t) { return uint64_t(t) ^ kSignBit; }
int64_t S(uint64_t u) { return int64_t(u ^ kSignBit); }
unsigned Shift(int level) { return kTimeShift0 + 3 * unsigned(level); }

std::span<const uint8_t> Span(const MDB_val& v) { return {static_cast<const uint8_t*>(v.mv_data), v.mv_size}; }

std::array<uint8_t, 16> TimeKey(int64_t time_ns, uint64_t seq) {
  std::array<uint8_t, 16> k;
  BigEndian(U(time_ns), k.data());
  BigEndian(seq, k.data() + 8);
  return k;
}

std::array<uint8_t, 9> SumKey(int level, uint64_t bucket) {
  std::array<uint8_t, 9> k;
  k[0] = uint8_t(level);
  BigEndian(bucket, k.data() + 1);
  return k;
}

uint64_t ThinnedCount(const NodeRecord& r) { return r.provenance && r.provenance->thinned ? r.provenance->thinned->nodes : 0; }

// time row value: id, varint lane, varint changes, varint thinned.
std::vector<uint8_t> EncodeTimeValue(const TimeRow& r) {
  ByteWriter w;
  w.Raw(r.id.bytes.data(), 32);
  w.Var(r.lane);
  w.Var(r.changes);
  w.Var(r.thinned);
  return std::move(w).bytes();
}

std::optional<TimeRow> DecodeTimeRow(const MDB_val& k, const MDB_val& v) {
  if (k.mv_size != 16) return std::nullopt;
  TimeRow r;
  const auto* kb = static_cast<const uint8_t*>(k.mv_data);
  r.time_ns = S(FromBigEndian(MDB_val{8, const_cast<uint8_t*>(kb)}));
  r.seq = FromBigEndian(MDB_val{8, const_cast<uint8_t*>(kb + 8)});
  ByteReader rd(Span(v));
  uint64_t lane;
  if (!rd.Raw(r.id.bytes.data(), 32) || !rd.Var(&lane) || !rd.Var(&r.changes) || !rd.Var(&r.thinned) ||
      lane > UINT32_MAX)
    return std::nullopt;
  r.lane = uint32_t(lane);
  return r;
}

// timeline row value: varint nodes, changes, thinned, lane count, then
// (varint slot, varint nodes) per lane slot that has nodes.
std::vector<uint8_t> EncodeSum(const TimeSum& s) {
  ByteWriter w;
  w.Var(s.nodes);
  w.Var(s.changes);
  w.Var(s.thinned);
  uint64_t n = 0;
  for (uint64_t c : s.lanes) n += c != 0;
  w.Var(n);
  for (uint32_t l = 0; l < TimeSum::kLaneSlots; ++l) {
    if (!s.lanes[l]) continue;
    w.Var(l);
    w.Var(s.lanes[l]);
  }
  return std::move(w).bytes();
}

std::optional<TimeSum> DecodeSum(std::span<const uint8_t> b) {
  ByteReader r(b);
  TimeSum s;
  uint64_t n;
  if (!r.Var(&s.nodes) || !r.Var(&s.changes) || !r.Var(&s.thinned) || !r.Var(&n) || n > TimeSum::kLaneSlots)
    return std::nullopt;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t slot, count;
    if (!r.Var(&slot) || !r.Var(&count) || slot >= TimeSum::kLaneSlots) return std::nullopt;
    s.lanes[slot] = count;
  }
  return s;
}

// lanes row value: signed time of the lane's newest node, varint its seq, its id.
struct LaneTip {
  int64_t time_ns = INT64_MIN;
  uint64_t seq = 0;
  store::ObjectId id;
};

std::vector<uint8_t> EncodeTip(const LaneTip& t) {
  ByteWriter w;
  w.Signed(t.time_ns);
  w.Var(t.seq);
  w.Raw(t.id.bytes.data(), 32);
  return std::move(w).bytes();
}

std::optional<LaneTip> DecodeTip(std::span<const uint8_t> b) {
  ByteReader r(b);
  LaneTip t;
  if (!r.Signed(&t.time_ns) || !r.Var(&t.seq) || !r.Raw(t.id.bytes.data(), 32)) return std::nullopt;
  return t;
}

Result<uint64_t> ReadU64(MDB_txn* txn, MDB_dbi info, const std::string& dir, std::string_view key, uint64_t absent) {
  MDB_val k = Val(key.data(), key.size()), v;
  int rc = mdb_get(txn, info, &k, &v);
  if (rc == MDB_NOTFOUND || (rc == 0 && v.mv_size != 8)) return absent;
  MDB_TRY(dir, rc);
  uint64_t n;
  std::memcpy(&n, v.mv_data, 8);
  return n;
}

Result<void> WriteU64(MDB_txn* txn, MDB_dbi info, const std::string& dir, std::string_view key, uint64_t n) {
  MDB_val k = Val(key.data(), key.size()), v = Val(&n, 8);
  MDB_TRY(dir, mdb_put(txn, info, &k, &v, 0));
  return {};
}

}  // namespace

// ---- upkeep, in a write transaction

Result<uint64_t> MetaDb::Txn::TimeNext() {
  if (!time_next_) {
    AE_ASSIGN(uint64_t n, ReadU64(txn_, db_->info_, db_->dir_, kTimeNextKey, 1));
    time_next_ = n;
  }
  return *time_next_;
}

Result<void> MetaDb::Txn::SetTimeNext(uint64_t next) {
  AE_TRY(WriteU64(txn_, db_->info_, db_->dir_, kTimeNextKey, next));
  time_next_ = next;
  return {};
}

Result<void> MetaDb::Txn::AddTimeNodes(int64_t delta) {
  AE_ASSIGN(uint64_t n, ReadU64(txn_, db_->info_, db_->dir_, kTimeNodesKey, 0));
  return WriteU64(txn_, db_->info_, db_->dir_, kTimeNodesKey, uint64_t(int64_t(n) + delta));
}

void MetaDb::Txn::AddTimeSums(int64_t time_ns, int64_t nodes, int64_t changes, int64_t thinned,
                              std::optional<uint32_t> lane) {
  for (int level = 0; level < int(kTimeLevels); ++level) {
    SumDelta& d = time_sums_[SumKey(level, U(time_ns) >> Shift(level))];
    d.nodes += nodes, d.changes += changes, d.thinned += thinned;
    if (lane) d.lanes[std::min(*lane, TimeSum::kLaneSlots - 1)] += nodes;
  }
}

Result<void> MetaDb::Txn::FlushTimeSums() {
  for (const auto& [key, d] : time_sums_) {
    MDB_val k = Val(key.data(), key.size()), v;
    TimeSum s;
    int rc = mdb_get(txn_, db_->timeline_, &k, &v);
    if (rc == 0) {
      auto have = DecodeSum(Span(v));
      if (!have) return Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad timeline row");
      s = *have;
    } else if (rc != MDB_NOTFOUND) {
      MDB_TRY(db_->dir_, rc);
    }
    auto add = [](uint64_t& x, int64_t delta) { x = uint64_t(std::max<int64_t>(0, int64_t(x) + delta)); };
    add(s.nodes, d.nodes), add(s.changes, d.changes), add(s.thinned, d.thinned);
    for (uint32_t l = 0; l < TimeSum::kLaneSlots; ++l) add(s.lanes[l], d.lanes[l]);
    if (s.nodes == 0) {
      rc = mdb_del(txn_, db_->timeline_, &k, nullptr);
      if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
      continue;
    }
    auto bytes = EncodeSum(s);
    v = Val(bytes.data(), bytes.size());
    MDB_TRY(db_->dir_, mdb_put(txn_, db_->timeline_, &k, &v, 0));
  }
  time_sums_.clear();
  return {};
}

Result<uint32_t> MetaDb::Txn::AssignLane(const NodeRecord& r) {
  const std::string& dir = db_->dir_;
  std::optional<NodeRecord> parent;
  if (r.parent) {
    AE_ASSIGN(parent, GetNode(*r.parent));
  }
  std::optional<uint32_t> plane;
  if (parent) {
    auto key = TimeKey(parent->time_ns, parent->seq);
    MDB_val k = Val(key.data(), key.size()), v;
    int rc = mdb_get(txn_, db_->time_, &k, &v);
    if (rc == 0) {
      if (auto row = DecodeTimeRow(k, v)) plane = row->lane;
    } else if (rc != MDB_NOTFOUND) {
      MDB_TRY(dir, rc);
    }
  }
  // The tips: continue the parent's lane when it ends there, else the
  // lowest lane (from 1) free since the parent's time, else a new lane.
  const int64_t since = parent ? parent->time_ns : r.time_ns;
  std::optional<uint32_t> lane, free;
  uint32_t count = 0;
  MDB_cursor* c;
  MDB_TRY(dir, mdb_cursor_open(txn_, db_->lanes_, &c));
  MDB_val k, v;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    uint32_t l = uint32_t(FromBigEndian(k));
    count = std::max(count, l + 1);
    auto tip = DecodeTip(Span(v));
    if (!tip) continue;  // a lane that does not decode is never reused
    if (plane && l == *plane && parent && tip->id == parent->id) lane = l;
    if (!free && l >= 1 && tip->time_ns < since) free = l;
  }
  mdb_cursor_close(c);
  if (!lane) lane = count == 0 ? 0 : free ? *free : count;
  // The lane's newest node is this one now.
  LaneTip tip;
  uint8_t key[4];
  for (int i = 0; i < 4; ++i) key[i] = uint8_t(*lane >> (24 - 8 * i));
  k = Val(key, 4);
  int rc = mdb_get(txn_, db_->lanes_, &k, &v);
  if (rc == 0) {
    if (auto t = DecodeTip(Span(v))) tip.time_ns = t->time_ns;
  } else if (rc != MDB_NOTFOUND) {
    MDB_TRY(dir, rc);
  }
  tip.time_ns = std::max(tip.time_ns, r.time_ns);
  tip.seq = r.seq;
  tip.id = r.id;
  auto bytes = EncodeTip(tip);
  v = Val(bytes.data(), bytes.size());
  MDB_TRY(dir, mdb_put(txn_, db_->lanes_, &k, &v, 0));
  return *lane;
}

Result<void> MetaDb::Txn::IndexNode(const NodeRecord& r) {
  TimeRow row{r.time_ns, r.seq, r.id, 0, r.changes, ThinnedCount(r)};
  AE_ASSIGN(row.lane, AssignLane(r));
  auto key = TimeKey(r.time_ns, r.seq);
  auto value = EncodeTimeValue(row);
  MDB_val k = Val(key.data(), key.size()), v = Val(value.data(), value.size());
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->time_, &k, &v, 0));
  AddTimeSums(r.time_ns, 1, int64_t(row.changes), int64_t(row.thinned), row.lane);
  if (time_sums_.size() > kMaxPendingSums) AE_TRY(FlushTimeSums());
  return AddTimeNodes(1);
}

Result<void> MetaDb::Txn::UnindexNode(const NodeRecord& stored) {
  auto key = TimeKey(stored.time_ns, stored.seq);
  MDB_val k = Val(key.data(), key.size()), v;
  int rc = mdb_get(txn_, db_->time_, &k, &v);
  if (rc == MDB_NOTFOUND) return {};
  MDB_TRY(db_->dir_, rc);
  auto row = DecodeTimeRow(k, v);
  if (!row) return Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad time row of node " + stored.id.Hex());
  MDB_TRY(db_->dir_, mdb_del(txn_, db_->time_, &k, nullptr));
  AddTimeSums(row->time_ns, -1, -int64_t(row->changes), -int64_t(row->thinned), row->lane);
  if (time_sums_.size() > kMaxPendingSums) AE_TRY(FlushTimeSums());
  return AddTimeNodes(-1);
}

Result<void> MetaDb::Txn::ReindexNode(const NodeRecord& old, const NodeRecord& r) {
  if (old.time_ns != r.time_ns || old.seq != r.seq) {
    AE_TRY(UnindexNode(old));
    return IndexNode(r);
  }
  auto key = TimeKey(r.time_ns, r.seq);
  MDB_val k = Val(key.data(), key.size()), v;
  int rc = mdb_get(txn_, db_->time_, &k, &v);
  if (rc == MDB_NOTFOUND) return IndexNode(r);
  MDB_TRY(db_->dir_, rc);
  auto row = DecodeTimeRow(k, v);
  if (!row) return Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad time row of node " + r.id.Hex());
  const uint64_t thinned = ThinnedCount(r);
  if (row->changes == r.changes && row->thinned == thinned) return {};
  AddTimeSums(r.time_ns, 0, int64_t(r.changes) - int64_t(row->changes), int64_t(thinned) - int64_t(row->thinned),
              std::nullopt);
  row->changes = r.changes;
  row->thinned = thinned;
  auto value = EncodeTimeValue(*row);
  v = Val(value.data(), value.size());
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->time_, &k, &v, 0));
  return {};
}

Result<void> MetaDb::Txn::ClearTimeIndex() {
  for (MDB_dbi dbi : {db_->time_, db_->timeline_, db_->lanes_}) MDB_TRY(db_->dir_, mdb_drop(txn_, dbi, 0));
  time_sums_.clear();
  AE_TRY(WriteU64(txn_, db_->info_, db_->dir_, kTimeNodesKey, 0));
  return SetTimeNext(1);
}

// ---- building

Result<bool> MetaDb::TimeIndexed() const {
  READ_TXN(t);
  AE_ASSIGN(uint64_t next, ReadU64(t.txn, info_, dir_, kTimeNextKey, 1));
  AE_ASSIGN(uint64_t indexed, ReadU64(t.txn, info_, dir_, kTimeNodesKey, 0));
  AE_ASSIGN(uint64_t next_seq, ReadU64(t.txn, info_, dir_, kNextSeqKey, 1));
  MDB_stat st;
  MDB_TRY(dir_, mdb_stat(t.txn, nodes_, &st));
  return next >= next_seq && indexed == uint64_t(st.ms_entries);
}

Result<void> MetaDb::EnsureTimeIndex() {
  AE_ASSIGN(bool whole, TimeIndexed());
  if (whole) return {};
  bool checked = false;
  for (;;) {
    AE_ASSIGN(auto txn, Begin());
    AE_ASSIGN(uint64_t next, txn->TimeNext());
    AE_ASSIGN(uint64_t next_seq, txn->PeekSeq());
    AE_ASSIGN(uint64_t indexed, ReadU64(txn->txn_, info_, dir_, kTimeNodesKey, 0));
    MDB_stat st;
    MDB_TRY(dir_, mdb_stat(txn->txn_, nodes_, &st));
    const uint64_t nodes = uint64_t(st.ms_entries);
    if (!checked) {
      // What the index holds must be the nodes before `next`: an older
      // binary that dropped or rewrote nodes leaves it disagreeing, and it
      // is built again from the first node.
      uint64_t rest = 0;
      MDB_cursor* c;
      MDB_TRY(dir_, mdb_cursor_open(txn->txn_, seq_, &c));
      uint8_t key[8];
      BigEndian(next, key);
      MDB_val k = Val(key, 8), v;
      for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        trim_->Tick();
        ++rest;
      }
      mdb_cursor_close(c);
      if (indexed + rest != nodes) {
        AE_TRY(txn->ClearTimeIndex());
        next = 1;
      }
      checked = true;
    } else if (next >= next_seq && indexed == nodes) {
      return {};
    }
    AE_ASSIGN(auto chunk, txn->NodesFrom(next, kTimeChunk));
    for (const NodeRecord& r : chunk) AE_TRY(txn->IndexNode(r));
    AE_TRY(txn->SetTimeNext(chunk.size() < kTimeChunk ? std::max(next_seq, next) : chunk.back().seq + 1));
    const bool done = chunk.size() < kTimeChunk;
    AE_TRY(txn->Commit());
    if (done) return {};
  }
}

Result<void> MetaDb::NodesInTime(int64_t from, int64_t to, const std::function<Result<bool>(const NodeRecord&)>& fn) {
  AE_TRY(EnsureTimeIndex());
  AE_ASSIGN(auto reader, ReadTime());
  // The records are keyed by id, which is random: looked up in time order,
  // every one faults a page of its own. A window of rows is looked up in
  // id (key) order instead, each leaf page once and its neighbours by
  // fault-around, then handed to fn in time order; memory stays one
  // window's records whatever the span.
  constexpr size_t kWindow = 8192;
  std::vector<store::ObjectId> window;
  std::vector<size_t> order;
  std::vector<std::optional<NodeRecord>> records;
  bool go = true;
  auto flush = [&]() -> Result<void> {
    order.resize(window.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return window[a] < window[b]; });
    records.assign(window.size(), std::nullopt);
    for (size_t i : order) {
      AE_ASSIGN(records[i], reader->GetNode(window[i]));
    }
    window.clear();
    for (auto& rec : records) {
      if (!rec) continue;  // a row whose node is gone: not in history
      AE_ASSIGN(go, fn(*rec));
      if (!go) break;
    }
    return {};
  };
  AE_TRY(reader->ForEach(from, to, [&](const TimeRow& row) -> Result<bool> {
    window.push_back(row.id);
    if (window.size() == kWindow) AE_TRY(flush());
    return go;
  }));
  if (go && !window.empty()) AE_TRY(flush());
  return {};
}

// ---- reading

MetaDb::TimeReader::~TimeReader() {
  if (txn_) mdb_txn_abort(txn_);
}

Result<std::unique_ptr<MetaDb::TimeReader>> MetaDb::ReadTime() const {
  auto r = std::unique_ptr<TimeReader>(new TimeReader);
  r->db_ = this;
  MDB_TRY(dir_, mdb_txn_begin(env_, nullptr, MDB_RDONLY, &r->txn_));
  return r;
}

Result<std::optional<NodeRecord>> MetaDb::TimeReader::GetNode(const store::ObjectId& id) const {
  db_->trim_->Tick();
  MDB_val k = Val(id), v;
  int rc = mdb_get(txn_, db_->nodes_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<NodeRecord>();
  MDB_TRY(db_->dir_, rc);
  auto r = DecodeRecord(id, Span(v));
  if (!r) return Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad node record " + id.Hex());
  return r;
}

Result<void> MetaDb::TimeReader::ForEach(int64_t from, int64_t to,
                                         const std::function<Result<bool>(const TimeRow&)>& fn) const {
  if (to < from) return {};
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->time_, &c));
  auto key = TimeKey(from, 0);
  MDB_val k = Val(key.data(), key.size()), v;
  Result<void> err;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    db_->trim_->Tick();
    auto row = DecodeTimeRow(k, v);
    if (!row) {
      err = Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad time row");
      break;
    }
    if (row->time_ns > to) break;
    auto more = fn(*row);
    if (!more) {
      err = Unexpected<Error>(more.error());
      break;
    }
    if (!*more) break;
  }
  mdb_cursor_close(c);
  return err;
}

// The row at or after time key `at` (before: the last row before it).
Result<std::optional<TimeRow>> MetaDb::TimeReader::Seek(uint64_t at, bool before) const {
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->time_, &c));
  uint8_t key[16] = {};
  BigEndian(at, key);
  MDB_val k = Val(key, 16), v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  if (before) rc = rc == 0 ? mdb_cursor_get(c, &k, &v, MDB_PREV) : mdb_cursor_get(c, &k, &v, MDB_LAST);
  std::optional<TimeRow> out;
  if (rc == 0) out = DecodeTimeRow(k, v);
  mdb_cursor_close(c);
  if (rc != 0 && rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  if (rc == 0 && !out) return Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad time row");
  return out;
}

Result<std::optional<TimeRow>> MetaDb::TimeReader::AtOrBefore(int64_t t) const {
  if (t == INT64_MAX) return Last();
  return Seek(U(t + 1), true);
}

Result<std::optional<TimeRow>> MetaDb::TimeReader::First() const { return Seek(0, false); }

Result<std::optional<TimeRow>> MetaDb::TimeReader::Last() const {
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->time_, &c));
  MDB_val k, v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
  std::optional<TimeRow> out;
  if (rc == 0) out = DecodeTimeRow(k, v);
  mdb_cursor_close(c);
  if (rc != 0 && rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return out;
}

Result<std::optional<TimeRow>> MetaDb::TimeReader::Row(const NodeRecord& r) const {
  auto key = TimeKey(r.time_ns, r.seq);
  MDB_val k = Val(key.data(), key.size()), v;
  int rc = mdb_get(txn_, db_->time_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<TimeRow>();
  MDB_TRY(db_->dir_, rc);
  return DecodeTimeRow(k, v);
}

Result<uint32_t> MetaDb::TimeReader::Lanes() const {
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->lanes_, &c));
  MDB_val k, v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
  uint32_t n = rc == 0 ? uint32_t(FromBigEndian(k)) + 1 : 0;
  mdb_cursor_close(c);
  if (rc != 0 && rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return n;
}

// Calls fn(bucket, sum) for the rows of `level` with lo <= bucket < hi.
Result<void> MetaDb::TimeReader::Level(int level, uint64_t lo, uint64_t hi,
                                       const std::function<void(uint64_t, const TimeSum&)>& fn) const {
  if (lo >= hi) return {};
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->timeline_, &c));
  auto key = SumKey(level, lo);
  MDB_val k = Val(key.data(), key.size()), v;
  Result<void> err;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    const auto* kb = static_cast<const uint8_t*>(k.mv_data);
    if (k.mv_size != 9 || kb[0] != level) break;
    uint64_t bucket = FromBigEndian(MDB_val{8, const_cast<uint8_t*>(kb + 1)});
    if (bucket >= hi) break;
    auto sum = DecodeSum(Span(v));
    if (!sum) {
      err = Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad timeline row");
      break;
    }
    fn(bucket, *sum);
  }
  mdb_cursor_close(c);
  return err;
}

// The nodes with a <= U(time) < b, summed: the rows of `level` wholly
// inside, the parts at either side from the level below (the nodes
// themselves below level 0).
Result<TimeSum> MetaDb::TimeReader::Agg(int level, u128 a, u128 b) const {
  TimeSum sum;
  if (a >= b) return sum;
  if (level < 0) {
    AE_TRY(ForEach(S(uint64_t(a)), S(uint64_t(b - 1)), [&](const TimeRow& r) -> Result<bool> {
      sum.AddRow(r);
      return true;
    }));
    return sum;
  }
  const unsigned s = Shift(level);
  const u128 w = u128(1) << s;
  const u128 lo = (a + w - 1) >> s, hi = b >> s;  // whole buckets [lo, hi)
  if (lo >= hi) return Agg(level - 1, a, b);
  AE_TRY(Level(level, uint64_t(lo), uint64_t(hi), [&](uint64_t, const TimeSum& x) { sum.Add(x); }));
  AE_ASSIGN(TimeSum left, Agg(level - 1, a, lo << s));
  AE_ASSIGN(TimeSum right, Agg(level - 1, hi << s, b));
  sum.Add(left);
  sum.Add(right);
  return sum;
}

Result<TimeSum> MetaDb::TimeReader::Sum(int64_t from, int64_t to) const {
  if (to < from) return TimeSum{};
  return Agg(int(kTimeLevels) - 1, U(from), u128(U(to)) + 1);
}

Result<MetaDb::TimeReader::Buckets> MetaDb::TimeReader::Bucketize(int64_t from, int64_t to, uint32_t max_buckets,
                                                                  uint64_t raw_max) const {
  Buckets out;
  if (to < from) return out;
  max_buckets = std::max<uint32_t>(1, max_buckets);
  const u128 a = U(from), b = u128(U(to)) + 1;
  auto count_of = [&](u128 w) { return (b - 1) / w - a / w + 1; };
  // The smallest width k 2^(33 + 3 l) that needs at most max_buckets.
  u128 width = 0;
  int level = 0;
  for (int l = 0; l < int(kTimeLevels) && !width; ++l)
    for (unsigned k = 1; k <= 8 && !width; ++k)
      if (count_of(u128(k) << Shift(l)) <= max_buckets) width = u128(k) << Shift(l), level = l;
  if (!width) width = u128(1) << 64, level = int(kTimeLevels) - 1;
  auto push = [&](int64_t t0, int64_t t1, const TimeSum& sum) {
    if (sum.nodes) out.buckets.push_back({t0, t1, sum, {}, {}});
  };
  if (level == 0 && width == (u128(1) << kTimeShift0) && (b - a) / max_buckets < width) {
    // Finer than the summary: from the nodes themselves, when few enough.
    AE_ASSIGN(TimeSum all, Sum(from, to));
    if (all.nodes <= raw_max) {
      const u128 w = std::max<u128>(1, (b - a + max_buckets - 1) / max_buckets);
      out.width = int64_t(std::min<u128>(w, INT64_MAX));
      std::optional<uint64_t> at;
      TimeBucket cur;
      AE_TRY(ForEach(from, to, [&](const TimeRow& r) -> Result<bool> {
        const uint64_t index = uint64_t((U(r.time_ns) - a) / w);
        if (!at || *at != index) {
          if (at) out.buckets.push_back(cur);
          at = index;
          const u128 t0 = a + u128(index) * w;
          cur = {S(uint64_t(t0)), S(uint64_t(std::min<u128>(std::min(t0 + w, b), u128(UINT64_MAX)))), {}, r, r};
        }
        cur.sum.AddRow(r);
        cur.last = r;
        return true;
      }));
      if (at) out.buckets.push_back(cur);
      return out;
    }
  }
  out.width = int64_t(std::min<u128>(width, INT64_MAX));
  auto t_of = [](u128 u) { return S(uint64_t(std::min<u128>(u, u128(UINT64_MAX)))); };
  // Whole output buckets [lo, hi) are sums of summary rows of `level`;
  // the parts of the range before lo and after hi are clipped buckets.
  const u128 lo = (a + width - 1) / width, hi = b / width;
  if (lo >= hi) {
    AE_ASSIGN(TimeSum sum, Agg(int(kTimeLevels) - 1, a, b));
    push(from, to == INT64_MAX ? INT64_MAX : to + 1, sum);
  } else {
    AE_ASSIGN(TimeSum left, Agg(int(kTimeLevels) - 1, a, lo * width));
    push(from, t_of(lo * width), left);
    const unsigned s = Shift(level);
    std::optional<u128> at;
    TimeSum cur;
    AE_TRY(Level(level, uint64_t((lo * width) >> s), uint64_t((hi * width) >> s), [&](uint64_t bucket, const TimeSum& x) {
      const u128 index = (u128(bucket) << s) / width;
      if (at && *at != index) push(t_of(*at * width), t_of((*at + 1) * width), cur), cur = {};
      at = index;
      cur.Add(x);
    }));
    if (at) push(t_of(*at * width), t_of((*at + 1) * width), cur);
    AE_ASSIGN(TimeSum right, Agg(int(kTimeLevels) - 1, hi * width, b));
    push(t_of(hi * width), to == INT64_MAX ? INT64_MAX : to + 1, right);
  }
  // The clipped buckets end where the range does; each bucket's oldest and
  // newest node.
  for (TimeBucket& bk : out.buckets) {
    if (bk.t0 < from) bk.t0 = from;
    AE_ASSIGN(auto first, Seek(U(bk.t0), false));
    AE_ASSIGN(auto last, Seek(U(bk.t1), true));
    if (first) bk.first = *first;
    if (last) bk.last = *last;
  }
  return out;
}

}  // namespace agentenv::snap
