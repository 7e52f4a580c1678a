#include "snap/meta.h"

#include <sys/stat.h>

#include <cstring>

#include "snap/fsops.h"
#include "snap/meta_internal.h"
#include "snap/varint.h"
#include "store/nocow.h"

namespace agentenv::snap {

using meta_internal::BigEndian;
using meta_internal::DecodeEntry;
using meta_internal::DecodeRecord;
using meta_internal::DecodeStat;
using meta_internal::EncodeEntry;
using meta_internal::EncodeRecord;
using meta_internal::EncodeStat;
using meta_internal::FromBigEndian;
using meta_internal::IdOf;
using meta_internal::Val;

namespace {

// Virtual size of the map. LMDB grows the file only as pages are used, so
// a large reservation costs address space, not disk, and saves resizing.
constexpr size_t kMapSize = size_t{64} << 30;
// LMDB keys are at most 511 bytes; longer paths are keyed by their hash.
constexpr size_t kMaxPathKey = 480;

std::span<const uint8_t> Span(const MDB_val& v) {
  return {static_cast<const uint8_t*>(v.mv_data), v.mv_size};
}

std::string PathKey(std::string_view path) {
  if (path.size() <= kMaxPathKey) return std::string(path);
  auto h = store::ObjectId::Of({reinterpret_cast<const uint8_t*>(path.data()), path.size()});
  return "\x01long:" + h.Hex();
}

// The fields both caches start with.
void WriteFields(ByteWriter& w, const StatFields& f) {
  for (uint64_t v : {f.dev, f.ino, f.size, uint64_t(f.mode), uint64_t(f.uid), uint64_t(f.gid)}) w.Var(v);
  w.Signed(f.mtime_ns);
  w.Signed(f.ctime_ns);
  w.Pairs(f.xattrs);
}

bool ReadFields(ByteReader& r, size_t max, StatFields* f) {
  uint64_t mode, uid, gid;
  if (!r.Var(&f->dev) || !r.Var(&f->ino) || !r.Var(&f->size) || !r.Var(&mode) || !r.Var(&uid) ||
      !r.Var(&gid) || !r.Signed(&f->mtime_ns) || !r.Signed(&f->ctime_ns))
    return false;
  f->mode = uint32_t(mode);
  f->uid = uint32_t(uid);
  f->gid = uint32_t(gid);
  return r.Pairs(&f->xattrs, max);
}

}  // namespace

namespace meta_internal {

// The tags of a node record's sections (docs/meta-format.md).
constexpr uint64_t kPackagesSection = 1, kProvenanceSection = 2;

namespace {

void PutSection(ByteWriter& w, uint64_t tag, const std::vector<uint8_t>& b) {
  w.Var(tag);
  w.Var(b.size());
  w.Raw(b.data(), b.size());
}

}  // namespace

std::vector<uint8_t> EncodeRecord(const NodeRecord& r) {
  ByteWriter w;
  w.Var(r.seq);
  w.Signed(r.time_ns);
  w.U8(r.parent ? 1 : 0);
  if (r.parent) w.Raw(r.parent->bytes.data(), 32);
  w.Raw(r.tree.bytes.data(), 32);
  w.Var(r.flags);
  w.Var(r.changes);
  w.Str(r.title);
  if (r.flags & NodeRecord::kDamaged) w.Str(r.damage);  // records of intact nodes end at the title
  // Optional sections, each (varint tag, varint length, bytes): older
  // decoders stop before them, newer ones skip the tags they do not know.
  if (r.packages) {
    ByteWriter sec;
    EncodePackageDeltas(sec, *r.packages);
    PutSection(w, kPackagesSection, std::move(sec).bytes());
  }
  if (r.provenance) PutSection(w, kProvenanceSection, EncodeProvenance(*r.provenance));
  for (const auto& [tag, bytes] : r.unknown_sections) PutSection(w, tag, bytes);
  return std::move(w).bytes();
}

std::optional<NodeRecord> DecodeRecord(const store::ObjectId& id, std::span<const uint8_t> b) {
  ByteReader r(b);
  NodeRecord n;
  n.id = id;
  uint8_t has_parent;
  uint64_t flags;
  if (!r.Var(&n.seq) || !r.Signed(&n.time_ns) || !r.U8(&has_parent)) return std::nullopt;
  if (has_parent) {
    store::ObjectId p;
    if (!r.Raw(p.bytes.data(), 32)) return std::nullopt;
    n.parent = p;
  }
  if (!r.Raw(n.tree.bytes.data(), 32) || !r.Var(&flags) || !r.Var(&n.changes) || !r.Str(&n.title))
    return std::nullopt;
  n.flags = uint32_t(flags);
  if ((n.flags & NodeRecord::kDamaged) && !r.Str(&n.damage)) return std::nullopt;
  while (!r.done()) {
    uint64_t tag, len;
    std::span<const uint8_t> body;
    if (!r.Var(&tag) || !r.Var(&len) || !r.Span(len, &body)) return std::nullopt;
    if (tag == kPackagesSection) {
      ByteReader sec(body);
      PackageDeltas p;
      if (!DecodePackageDeltas(sec, body.size(), &p) || !sec.done()) return std::nullopt;
      n.packages = std::move(p);
    } else if (tag == kProvenanceSection) {
      auto p = DecodeProvenance(body, "node record");
      if (!p) return std::nullopt;
      n.provenance = std::move(*p);
    } else {
      n.unknown_sections.emplace_back(tag, std::vector<uint8_t>(body.begin(), body.end()));
    }
  }
  return n;
}

std::vector<uint8_t> EncodeStat(const StatEntry& e) {
  ByteWriter w;
  WriteFields(w, e);
  w.Raw(e.ref.id.bytes.data(), 32);
  w.U8(uint8_t(e.ref.type));
  w.Var(e.ref.size);
  return std::move(w).bytes();
}

std::optional<StatEntry> DecodeStat(std::span<const uint8_t> b) {
  ByteReader r(b);
  StatEntry e;
  uint8_t type;
  if (!ReadFields(r, b.size(), &e) || !r.Raw(e.ref.id.bytes.data(), 32) || !r.U8(&type) || !r.Var(&e.ref.size))
    return std::nullopt;
  // A file's content is a chunk or a manifest: any other type would go
  // into a tree entry that no tree decoder reads back.
  if (type != uint8_t(store::ObjectType::kChunk) && type != uint8_t(store::ObjectType::kManifest)) return std::nullopt;
  e.ref.type = store::ObjectType(type);
  return e;
}

// Entries end after the target, or go on with a directory's tree hint.
std::vector<uint8_t> EncodeEntry(const EntryStat& e) {
  ByteWriter w;
  WriteFields(w, e);
  w.Str(e.target);
  if (e.tree) {
    w.Raw(e.tree->bytes.data(), 32);
    w.Var(e.tree_removals);
  }
  return std::move(w).bytes();
}

std::optional<EntryStat> DecodeEntry(std::span<const uint8_t> b) {
  ByteReader r(b);
  EntryStat e;
  if (!ReadFields(r, b.size(), &e) || !r.Str(&e.target)) return std::nullopt;
  if (r.done()) return e;
  store::ObjectId tree;
  if (!r.Raw(tree.bytes.data(), 32) || !r.Var(&e.tree_removals)) return std::nullopt;
  e.tree = tree;
  return e;
}

}  // namespace meta_internal

Result<void> MetaDb::Sync() {
  MDB_TRY(dir_, mdb_env_sync(env_, 1));
  MDB_TRY(dir_, mdb_env_set_flags(env_, MDB_NOSYNC, 0));
  return {};
}

StatFields StatFields::Of(const struct stat& st, uint64_t dev) {
  return {dev ? dev : uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size), ToNs(st.st_mtim), ToNs(st.st_ctim),
          st.st_mode, st.st_uid, st.st_gid, {}};
}

Result<std::unique_ptr<MetaDb>> MetaDb::Open(const std::string& dir, bool create) {
  if (create) {
    if (::mkdir(dir.c_str(), 0755) == 0) store::MarkNoCow(dir);
    else if (errno != EEXIST) return FailErrno(dir, errno);
  }
  std::unique_ptr<MetaDb> db(new MetaDb);
  db->dir_ = dir;
  MDB_TRY(dir, mdb_env_create(&db->env_));
  MDB_TRY(dir, mdb_env_set_maxdbs(db->env_, 32));
  MDB_TRY(dir, mdb_env_set_mapsize(db->env_, kMapSize));
  MDB_TRY(dir, mdb_env_set_maxreaders(db->env_, 1022));
  MDB_TRY(dir, mdb_env_open(db->env_, dir.c_str(), MDB_NOTLS | (create ? MDB_NOSYNC : 0), 0644));
  int dead = 0;
  mdb_reader_check(db->env_, &dead);
  MDB_txn* txn = nullptr;
  MDB_TRY(dir, mdb_txn_begin(db->env_, nullptr, 0, &txn));
  unsigned flags = create ? MDB_CREATE : 0;
  int rc = 0;
  for (auto [name, dbi, extra] : {std::tuple{"nodes", &db->nodes_, 0u}, {"seq", &db->seq_, 0u},
                                  {"children", &db->children_, unsigned(MDB_DUPSORT)},
                                  {"refs", &db->refs_, 0u}, {"stat", &db->stat_, 0u},
                                  {"info", &db->info_, 0u}}) {
    if ((rc = mdb_dbi_open(txn, name, flags | extra, dbi)) != 0) break;
  }
  // Tables added after the first format: created in older indexes too.
  for (auto [name, dbi] : {std::pair{"refcount", &db->refcount_}, {"garbage", &db->garbage_},
                           {"recount", &db->recount_}, {"entries", &db->entries_},
                           {"deferred", &db->deferred_}, {"garbage_log", &db->garbage_log_},
                           {"oplog", &db->oplog_}, {"time", &db->time_}, {"timeline", &db->timeline_},
                           {"lanes", &db->lanes_}}) {
    if (rc == 0) rc = mdb_dbi_open(txn, name, MDB_CREATE, dbi);
  }
  if (rc == 0) rc = mdb_dbi_open(txn, "oplog_nodes", MDB_CREATE | MDB_DUPSORT, &db->oplog_nodes_);
  if (rc == 0) rc = mdb_txn_commit(txn);
  else mdb_txn_abort(txn);
  if (rc == MDB_NOTFOUND) return Fail(ErrorCode::kNotFound, dir + ": not an agentenv metadata index");
  MDB_TRY(dir, rc);
  db->trim_ = std::make_unique<store::MapTrimmer>(db->env_);
  return db;
}

MetaDb::~MetaDb() {
  if (env_) mdb_env_close(env_);
}


Result<std::optional<NodeRecord>> MetaDb::GetNode(const store::ObjectId& id) const {
  READ_TXN(t);
  MDB_val k = Val(id), v;
  int rc = mdb_get(t.txn, nodes_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<NodeRecord>();
  MDB_TRY(dir_, rc);
  auto r = DecodeRecord(id, Span(v));
  if (!r) return Fail(ErrorCode::kCorrupt, dir_ + ": bad node record " + id.Hex());
  return r;
}

Result<std::optional<store::ObjectId>> MetaDb::GetRef(const std::string& name) const {
  READ_TXN(t);
  MDB_val k = Val(name.data(), name.size()), v;
  int rc = mdb_get(t.txn, refs_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<store::ObjectId>();
  MDB_TRY(dir_, rc);
  return std::optional<store::ObjectId>(IdOf(v));
}

namespace {

// The refs whose names start with `prefix`, in name order, as `txn` sees them.
Result<std::vector<std::pair<std::string, store::ObjectId>>> RefsIn(MDB_txn* txn, MDB_dbi refs,
                                                                    const std::string& dir,
                                                                    const std::string& prefix) {
  std::vector<std::pair<std::string, store::ObjectId>> out;
  MDB_cursor* c;
  MDB_TRY(dir, mdb_cursor_open(txn, refs, &c));
  MDB_val k = Val(prefix.data(), prefix.size()), v;
  for (int rc = mdb_cursor_get(c, &k, &v, prefix.empty() ? MDB_FIRST : MDB_SET_RANGE); rc == 0;
       rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    std::string name(static_cast<const char*>(k.mv_data), k.mv_size);
    if (name.compare(0, prefix.size(), prefix) != 0) break;
    out.emplace_back(std::move(name), IdOf(v));
  }
  mdb_cursor_close(c);
  return out;
}

// Walks the seq table from where `rc` (the positioning get's result) left c,
// by `step`, appending up to `limit` node records; rows whose node retention
// dropped are skipped. Closes c. Errors: kCorrupt on a bad record.
Result<void> CollectNodes(MDB_txn* txn, MDB_dbi nodes, const std::string& dir, MDB_cursor* c, int rc,
                          MDB_cursor_op step, size_t limit, std::vector<NodeRecord>& out) {
  MDB_val k, v;
  if (rc == 0) rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
  Result<void> err;
  for (; rc == 0 && out.size() < limit; rc = mdb_cursor_get(c, &k, &v, step)) {
    store::ObjectId id = IdOf(v);
    MDB_val nk = Val(id), nv;
    if (mdb_get(txn, nodes, &nk, &nv) != 0) continue;  // dropped by retention
    auto r = DecodeRecord(id, Span(nv));
    if (!r) {
      err = Fail(ErrorCode::kCorrupt, dir + ": bad node record " + id.Hex());
      break;
    }
    out.push_back(std::move(*r));
  }
  mdb_cursor_close(c);
  return err;
}

}  // namespace

Result<std::vector<std::pair<std::string, store::ObjectId>>> MetaDb::ListRefs(
    const std::string& prefix) const {
  READ_TXN(t);
  return RefsIn(t.txn, refs_, dir_, prefix);
}

// Puts seq cursor `c` on the newest node with a seq below `before` (0:
// the newest of all); the LMDB return code.
static int SeekBefore(MDB_cursor* c, uint64_t before) {
  MDB_val k, v;
  if (before == 0) return mdb_cursor_get(c, &k, &v, MDB_LAST);
  uint8_t key[8];
  BigEndian(before, key);
  k = Val(key, 8);
  int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  return rc == 0 ? mdb_cursor_get(c, &k, &v, MDB_PREV) : mdb_cursor_get(c, &k, &v, MDB_LAST);
}

Result<std::vector<NodeRecord>> MetaDb::Recent(size_t limit, uint64_t before) const {
  READ_TXN(t);
  std::vector<NodeRecord> out;
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, seq_, &c));
  const int rc = SeekBefore(c, before);
  AE_TRY(CollectNodes(t.txn, nodes_, dir_, c, rc, MDB_PREV, limit, out));
  return out;
}

Result<std::vector<store::ObjectId>> MetaDb::Children(const store::ObjectId& id) const {
  READ_TXN(t);
  std::vector<store::ObjectId> out;
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, children_, &c));
  MDB_val k = Val(id), v;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP))
    out.push_back(IdOf(v));
  mdb_cursor_close(c);
  return out;
}

Result<std::vector<store::ObjectId>> MetaDb::FindPrefix(const std::string& hex, size_t limit) const {
  // Seek to the smallest id with this prefix: the hex padded with zeros.
  std::string padded = hex + std::string(64 - std::min<size_t>(64, hex.size()), '0');
  AE_ASSIGN(auto lo, store::ObjectId::FromHex(padded.substr(0, 64)));
  READ_TXN(t);
  std::vector<store::ObjectId> out;
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, nodes_, &c));
  MDB_val k = Val(lo), v;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0 && out.size() < limit;
       rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    store::ObjectId id = IdOf(k);
    if (id.Hex().compare(0, hex.size(), hex) != 0) break;
    out.push_back(id);
  }
  mdb_cursor_close(c);
  return out;
}

Result<uint64_t> MetaDb::NodeCount() const {
  READ_TXN(t);
  MDB_stat st;
  MDB_TRY(dir_, mdb_stat(t.txn, nodes_, &st));
  return uint64_t(st.ms_entries);
}

Result<void> MetaDb::ForEachStat(const std::function<void(const StatEntry&)>& fn) const {
  READ_TXN(t);
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, stat_, &c));
  MDB_val k, v;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    trim_->Tick();
    if (auto e = DecodeStat(Span(v))) fn(*e);
  }
  mdb_cursor_close(c);
  return {};
}

namespace {

// Walks the seq table from where `rc` (the positioning get's result) left
// c, by `step`, calling fn with each node's record until it returns false;
// rows whose node retention dropped are skipped. Closes c.
Result<void> WalkNodes(MDB_txn* txn, MDB_dbi nodes, const std::string& dir, store::MapTrimmer& trim, MDB_cursor* c,
                       int rc, MDB_cursor_op step, const std::function<Result<bool>(const NodeRecord&)>& fn) {
  MDB_val k, v;
  if (rc == 0) rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
  Result<void> err;
  for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, step)) {
    trim.Tick();
    store::ObjectId id = IdOf(v);
    MDB_val nk = Val(id), nv;
    if (mdb_get(txn, nodes, &nk, &nv) != 0) continue;
    auto r = DecodeRecord(id, Span(nv));
    if (!r) {
      err = Fail(ErrorCode::kCorrupt, dir + ": bad node record " + id.Hex());
      break;
    }
    auto more = fn(*r);
    if (!more) {
      err = Unexpected<Error>(more.error());
      break;
    }
    if (!*more) break;
  }
  mdb_cursor_close(c);
  return err;
}

}  // namespace

Result<void> MetaDb::ForEachNode(const std::function<Result<bool>(const NodeRecord&)>& fn, uint64_t from_seq) const {
  READ_TXN(t);
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, seq_, &c));
  uint8_t key[8];
  BigEndian(from_seq, key);
  MDB_val k = Val(key, 8), v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  return WalkNodes(t.txn, nodes_, dir_, *trim_, c, rc, MDB_NEXT, fn);
}

Result<std::vector<NodeRecord>> MetaDb::NodesFrom(uint64_t from_seq, size_t limit) const {
  READ_TXN(t);
  std::vector<NodeRecord> out;
  if (limit == 0) return out;
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, seq_, &c));
  uint8_t key[8];
  BigEndian(from_seq, key);
  MDB_val k = Val(key, 8), v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  AE_TRY(WalkNodes(t.txn, nodes_, dir_, *trim_, c, rc, MDB_NEXT, [&](const NodeRecord& r) -> Result<bool> {
    out.push_back(r);
    return out.size() < limit;
  }));
  return out;
}

Result<void> MetaDb::ForEachRecent(const std::function<Result<bool>(const NodeRecord&)>& fn, uint64_t before) const {
  READ_TXN(t);
  MDB_cursor* c;
  MDB_TRY(dir_, mdb_cursor_open(t.txn, seq_, &c));
  const int rc = SeekBefore(c, before);
  return WalkNodes(t.txn, nodes_, dir_, *trim_, c, rc, MDB_PREV, fn);
}

MetaDb::StatReader::~StatReader() {
  for (MDB_cursor* c : {stat_.cursor, entries_.cursor})
    if (c) mdb_cursor_close(c);
  if (txn_) mdb_txn_abort(txn_);
}

namespace {

int CompareKey(const MDB_val& k, std::string_view key) {
  std::string_view have(static_cast<const char*>(k.mv_data), k.mv_size);
  return have.compare(key);
}

}  // namespace

std::optional<std::span<const uint8_t>> MetaDb::StatReader::Find(Cursor& c, std::string_view path) const {
  if (!c.cursor) return std::nullopt;  // NoStats
  // A full scan asks once per entry: no key copy for the usual short path,
  // and the trimmer hears of reads in groups (one shared counter bumped
  // per read would bounce between the workers' caches).
  if (++reads_ == kTickEvery) {
    trim_->Tick(reads_);
    reads_ = 0;
  }
  std::string long_key = path.size() > kMaxPathKey ? PathKey(path) : std::string();
  std::string_view key = long_key.empty() ? path : std::string_view(long_key);
  MDB_val k, v;
  // The entries of a directory come in name order, which is key order,
  // with at most the keys of a subdirectory's entries between two of them:
  // a few steps forward from the last key usually reach the next one (or
  // pass where it would be: absent) without a search.
  if (c.positioned && CompareKey(c.at, key) < 0) {
    for (int step = 0; step < kMaxSteps; ++step) {
      if (mdb_cursor_get(c.cursor, &k, &v, MDB_NEXT) != 0) {  // past the last key
        c.positioned = false;
        return std::nullopt;
      }
      c.at = k;
      int cmp = CompareKey(k, key);
      if (cmp == 0) return Span(v);
      if (cmp > 0) return std::nullopt;
    }
  }
  k = Val(key.data(), key.size());
  c.positioned = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE) == 0;
  if (!c.positioned) return std::nullopt;
  c.at = k;
  if (CompareKey(k, key) != 0) return std::nullopt;
  return Span(v);
}

std::optional<StatEntry> MetaDb::StatReader::Get(std::string_view path) const {
  auto v = Find(stat_, path);
  return v ? DecodeStat(*v) : std::nullopt;
}

std::optional<EntryStat> MetaDb::StatReader::GetEntry(std::string_view path) const {
  auto v = Find(entries_, path);
  return v ? DecodeEntry(*v) : std::nullopt;
}

Result<std::unique_ptr<MetaDb::StatReader>> MetaDb::ReadStats() const {
  auto r = std::unique_ptr<StatReader>(new StatReader);
  MDB_TRY(dir_, mdb_txn_begin(env_, nullptr, MDB_RDONLY, &r->txn_));
  MDB_TRY(dir_, mdb_cursor_open(r->txn_, stat_, &r->stat_.cursor));
  MDB_TRY(dir_, mdb_cursor_open(r->txn_, entries_, &r->entries_.cursor));
  r->trim_ = trim_.get();
  return r;
}

std::unique_ptr<MetaDb::StatReader> MetaDb::NoStats() { return std::unique_ptr<StatReader>(new StatReader); }

MetaDb::Txn::~Txn() {
  if (txn_) mdb_txn_abort(txn_);
}

Result<std::unique_ptr<MetaDb::Txn>> MetaDb::Begin() {
  auto t = std::unique_ptr<Txn>(new Txn);
  t->db_ = this;
  MDB_TRY(dir_, mdb_txn_begin(env_, nullptr, 0, &t->txn_));
  return t;
}

namespace {
constexpr std::string_view kNextSeqKey = "next_seq";
}  // namespace

Result<uint64_t> MetaDb::Txn::PeekSeq() {
  MDB_val k = Val(kNextSeqKey.data(), kNextSeqKey.size()), v;
  uint64_t next = 1;
  int rc = mdb_get(txn_, db_->info_, &k, &v);
  if (rc == 0 && v.mv_size == 8) std::memcpy(&next, v.mv_data, 8);
  else if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return next;
}

Result<uint64_t> MetaDb::Txn::NextSeq() {
  MDB_val k = Val(kNextSeqKey.data(), kNextSeqKey.size());
  AE_ASSIGN(uint64_t next, PeekSeq());
  uint64_t after = next + 1;
  MDB_val nv = Val(&after, 8);
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->info_, &k, &nv, 0));
  return next;
}

Result<void> MetaDb::Txn::PutNode(const NodeRecord& r) {
  AE_ASSIGN(std::optional<NodeRecord> old, GetNode(r.id));
  auto bytes = EncodeRecord(r);
  MDB_val k = Val(r.id), v = Val(bytes.data(), bytes.size());
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->nodes_, &k, &v, 0));
  uint8_t key[8];
  BigEndian(r.seq, key);
  MDB_val sk = Val(key, 8), sv = Val(r.id);
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->seq_, &sk, &sv, 0));
  // The time index holds the nodes before TimeNext: a rewritten one
  // follows, a new one joins it when every node before it is in it.
  AE_ASSIGN(uint64_t next, TimeNext());
  if (old) {
    if (old->seq < next) AE_TRY(ReindexNode(*old, r));
    return {};
  }
  if (r.seq < next) return IndexNode(r);
  if (r.seq > next) {
    MDB_cursor* c;
    MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->seq_, &c));
    uint8_t from[8];
    BigEndian(next, from);
    MDB_val fk = Val(from, 8), fv;
    int rc = mdb_cursor_get(c, &fk, &fv, MDB_SET_RANGE);
    bool behind = rc == 0 && FromBigEndian(fk) < r.seq;  // nodes the build has not reached
    mdb_cursor_close(c);
    if (rc != 0 && rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
    if (behind) return {};
  }
  AE_TRY(IndexNode(r));
  return SetTimeNext(r.seq + 1);
}

Result<std::vector<NodeRecord>> MetaDb::Txn::NodesFrom(uint64_t from_seq, size_t limit) {
  std::vector<NodeRecord> out;
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->seq_, &c));
  uint8_t key[8];
  BigEndian(from_seq, key);
  MDB_val k = Val(key, 8), v;
  Result<void> err;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0 && out.size() < limit;
       rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    db_->trim_->Tick();
    store::ObjectId id = IdOf(v);
    MDB_val nk = Val(id), nv;
    if (mdb_get(txn_, db_->nodes_, &nk, &nv) != 0) continue;  // dropped by retention
    auto r = DecodeRecord(id, Span(nv));
    if (!r) {
      err = Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad node record " + id.Hex());
      break;
    }
    out.push_back(std::move(*r));
  }
  mdb_cursor_close(c);
  AE_TRY(err);
  return out;
}

Result<std::vector<store::ObjectId>> MetaDb::Txn::Children(const store::ObjectId& id, size_t limit) {
  std::vector<store::ObjectId> out;
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->children_, &c));
  MDB_val k = Val(id), v;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET); rc == 0 && out.size() < limit;
       rc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP))
    out.push_back(IdOf(v));
  mdb_cursor_close(c);
  return out;
}

Result<std::optional<NodeRecord>> MetaDb::Txn::GetNode(const store::ObjectId& id) {
  MDB_val k = Val(id), v;
  int rc = mdb_get(txn_, db_->nodes_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<NodeRecord>();
  MDB_TRY(db_->dir_, rc);
  auto r = DecodeRecord(id, Span(v));
  if (!r) return Fail(ErrorCode::kCorrupt, db_->dir_ + ": bad node record " + id.Hex());
  return r;
}

Result<void> MetaDb::Txn::AddChild(const store::ObjectId& parent, const store::ObjectId& child) {
  MDB_val k = Val(parent), v = Val(child);
  int rc = mdb_put(txn_, db_->children_, &k, &v, MDB_NODUPDATA);
  if (rc != MDB_KEYEXIST) MDB_TRY(db_->dir_, rc);
  return {};
}

Result<void> MetaDb::Txn::RemoveChild(const store::ObjectId& parent, const store::ObjectId& child) {
  MDB_val k = Val(parent), v = Val(child);
  int rc = mdb_del(txn_, db_->children_, &k, &v);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return {};
}

Result<void> MetaDb::Txn::DeleteNode(const NodeRecord& r) {
  // What the time index holds is the stored record's.
  AE_ASSIGN(std::optional<NodeRecord> stored, GetNode(r.id));
  AE_ASSIGN(uint64_t next, TimeNext());
  if (stored && stored->seq < next) AE_TRY(UnindexNode(*stored));
  MDB_val k = Val(r.id);
  int rc = mdb_del(txn_, db_->nodes_, &k, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  rc = mdb_del(txn_, db_->children_, &k, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  uint8_t key[8];
  BigEndian(r.seq, key);
  MDB_val sk = Val(key, 8);
  rc = mdb_del(txn_, db_->seq_, &sk, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return {};
}

Result<void> MetaDb::Txn::SetRef(const std::string& name, const store::ObjectId& id) {
  MDB_val k = Val(name.data(), name.size()), v = Val(id);
  MDB_TRY(db_->dir_, mdb_put(txn_, db_->refs_, &k, &v, 0));
  return {};
}

Result<bool> MetaDb::Txn::HasNode(const store::ObjectId& id) {
  MDB_val k = Val(id), v;
  int rc = mdb_get(txn_, db_->nodes_, &k, &v);
  if (rc == MDB_NOTFOUND) return false;
  MDB_TRY(db_->dir_, rc);
  return true;
}

Result<std::vector<std::pair<std::string, store::ObjectId>>> MetaDb::Txn::ListRefs(const std::string& prefix) {
  return RefsIn(txn_, db_->refs_, db_->dir_, prefix);
}

Result<void> MetaDb::Txn::DeleteRef(const std::string& name) {
  MDB_val k = Val(name.data(), name.size());
  int rc = mdb_del(txn_, db_->refs_, &k, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return {};
}

Result<void> MetaDb::Txn::PutPath(MDB_dbi dbi, std::string_view path, const std::vector<uint8_t>& bytes) {
  db_->trim_->Tick();
  std::string key = PathKey(path);
  MDB_val k = Val(key.data(), key.size()), v = Val(bytes.data(), bytes.size());
  MDB_TRY(db_->dir_, mdb_put(txn_, dbi, &k, &v, 0));
  return {};
}

Result<void> MetaDb::Txn::DeletePath(MDB_dbi dbi, std::string_view path) {
  db_->trim_->Tick();
  std::string key = PathKey(path);
  MDB_val k = Val(key.data(), key.size());
  int rc = mdb_del(txn_, dbi, &k, nullptr);
  if (rc != MDB_NOTFOUND) MDB_TRY(db_->dir_, rc);
  return {};
}

Result<void> MetaDb::Txn::PutStat(std::string_view path, const StatEntry& e) {
  return PutPath(db_->stat_, path, EncodeStat(e));
}

Result<void> MetaDb::Txn::DeleteStat(std::string_view path) { return DeletePath(db_->stat_, path); }

Result<void> MetaDb::Txn::PutEntry(std::string_view path, const EntryStat& e) {
  return PutPath(db_->entries_, path, EncodeEntry(e));
}

Result<void> MetaDb::Txn::DeleteEntry(std::string_view path) { return DeletePath(db_->entries_, path); }

Result<uint64_t> MetaDb::Txn::ClearStats() {
  MDB_stat st;
  MDB_TRY(db_->dir_, mdb_stat(txn_, db_->stat_, &st));
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->stat_, 0));
  MDB_TRY(db_->dir_, mdb_drop(txn_, db_->entries_, 0));
  return uint64_t(st.ms_entries);
}

Result<std::optional<StatEntry>> MetaDb::Txn::GetStat(std::string_view path) {
  db_->trim_->Tick();
  std::string key = PathKey(path);
  MDB_val k = Val(key.data(), key.size()), v;
  int rc = mdb_get(txn_, db_->stat_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<StatEntry>();
  MDB_TRY(db_->dir_, rc);
  return DecodeStat(Span(v));
}

Result<void> MetaDb::Txn::ForEachStat(const std::function<Result<void>(const StatEntry&)>& fn) {
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, db_->stat_, &c));
  MDB_val k, v;
  Result<void> err;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0 && err; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    db_->trim_->Tick();
    if (auto e = DecodeStat(Span(v))) err = fn(*e);
  }
  mdb_cursor_close(c);
  return err;
}

Result<void> MetaDb::Txn::ForEachCachedPath(
    Cache cache, const std::function<Result<void>(std::string_view, const StatFields&)>& fn) {
  MDB_cursor* c;
  MDB_TRY(db_->dir_, mdb_cursor_open(txn_, cache == Cache::kStat ? db_->stat_ : db_->entries_, &c));
  MDB_val k, v;
  Result<void> err;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0 && err; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    db_->trim_->Tick();
    std::string_view path(static_cast<const char*>(k.mv_data), k.mv_size);
    if (path.size() > kMaxPathKey || path.rfind('\x01', 0) == 0) continue;  // a long path's hash
    if (cache == Cache::kStat) {
      if (auto e = DecodeStat(Span(v))) err = fn(path, *e);
    } else if (auto e = DecodeEntry(Span(v))) {
      err = fn(path, *e);
    }
  }
  mdb_cursor_close(c);
  return err;
}

Result<void> MetaDb::Txn::Commit() {
  AE_TRY(FlushTimeSums());
  int rc = mdb_txn_commit(txn_);
  txn_ = nullptr;
  MDB_TRY(db_->dir_, rc);
  return {};
}

}  // namespace agentenv::snap
