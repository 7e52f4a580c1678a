#include "store/index.h"

#include <sys/stat.h>

#include <cstring>
#include <mutex>
#include <string_view>

#include "store/le.h"
#include "store/lmdb_error.h"
#include "store/nocow.h"

namespace agentenv::store {
namespace {

constexpr size_t kInitialMap = size_t{8} << 20;
constexpr size_t kObjectValue = 32;
constexpr size_t kPackValueV1 = 32;  // rows written before dead accounting
constexpr size_t kPackValue = 56;
constexpr size_t kForEachPage = 4096;
constexpr std::string_view kRemovalsKey = "removals";

Unexpected<Error> MdbFail(const std::string& what, int rc) { return Unexpected<Error>(LmdbError(what, rc)); }

void EncodeInfo(const ObjectInfo& o, uint8_t* b) {
  std::memset(b, 0, kObjectValue);
  b[0] = uint8_t(o.type);
  b[1] = uint8_t(o.codec);
  for (int i = 0; i < 4; ++i) b[4 + i] = uint8_t(o.pack >> (8 * i));
  Put64(b + 8, o.offset);
  Put64(b + 16, o.size);
  Put64(b + 24, o.stored_size);
}
ObjectInfo DecodeInfo(const uint8_t* b) {
  ObjectInfo o;
  o.type = ObjectType(b[0]);
  o.codec = Codec(b[1]);
  o.pack = uint32_t(b[4] | b[5] << 8 | b[6] << 16 | uint32_t(b[7]) << 24);
  o.offset = Get64(b + 8);
  o.size = Get64(b + 16);
  o.stored_size = Get64(b + 24);
  return o;
}

// Pack keys are big-endian so LMDB's byte order is numeric order.
std::array<uint8_t, 4> PackKey(uint32_t n) {
  return {uint8_t(n >> 24), uint8_t(n >> 16), uint8_t(n >> 8), uint8_t(n)};
}

MDB_val Val(const void* p, size_t n) { return MDB_val{n, const_cast<void*>(p)}; }

}  // namespace

Result<std::unique_ptr<Index>> Index::Open(const std::string& dir, bool create) {
  if (create) {
    if (::mkdir(dir.c_str(), 0755) == 0) MarkNoCow(dir);
    else if (errno != EEXIST) return FailErrno(dir, errno);
  }
  std::unique_ptr<Index> ix(new Index());
  ix->dir_ = dir;
  int rc = mdb_env_create(&ix->env_);
  if (rc) return MdbFail(dir, rc);
  mdb_env_set_maxdbs(ix->env_, 4);
  mdb_env_set_maxreaders(ix->env_, 1024);
  // A larger map set by an earlier run wins: LMDB keeps the file's size.
  mdb_env_set_mapsize(ix->env_, kInitialMap);
  rc = mdb_env_open(ix->env_, dir.c_str(), MDB_NOTLS, 0644);
  if (rc) return MdbFail(dir, rc);
  int dead = 0;
  mdb_reader_check(ix->env_, &dead);
  ix->trim_ = std::make_unique<MapTrimmer>(ix->env_);

  MDB_txn* txn = nullptr;
  rc = mdb_txn_begin(ix->env_, nullptr, create ? 0 : MDB_RDONLY, &txn);
  if (rc) return MdbFail(dir, rc);
  unsigned flags = create ? MDB_CREATE : 0;
  if ((rc = mdb_dbi_open(txn, "objects", flags, &ix->objects_)) ||
      (rc = mdb_dbi_open(txn, "packs", flags, &ix->packs_)) ||
      (rc = mdb_dbi_open(txn, "meta", flags, &ix->meta_))) {
    mdb_txn_abort(txn);
    return MdbFail(dir + ": not a store index", rc);
  }
  rc = mdb_txn_commit(txn);
  if (rc) return MdbFail(dir, rc);
  return ix;
}

Index::~Index() {
  for (MDB_txn* txn : spare_) mdb_txn_abort(txn);
  if (env_) mdb_env_close(env_);
}

Result<MDB_txn*> Index::BeginRead(std::shared_lock<std::shared_mutex>* lock) const {
  for (;;) {
    *lock = std::shared_lock(resize_mu_);
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc == MDB_MAP_RESIZED) {
      lock->unlock();
      std::unique_lock excl(resize_mu_);
      mdb_env_set_mapsize(env_, 0);  // adopt the size another process set
      continue;
    }
    if (rc) return MdbFail(dir_, rc);
    return txn;
  }
}

Result<MDB_txn*> Index::TakeRead(std::shared_lock<std::shared_mutex>* lock) const {
  MDB_txn* txn = nullptr;
  {
    MutexLock spares(spare_mu_);
    if (!spare_.empty()) {
      txn = spare_.back();
      spare_.pop_back();
    }
  }
  if (txn) {
    *lock = std::shared_lock(resize_mu_);
    if (mdb_txn_renew(txn) == 0) return txn;
    // The map grew elsewhere (or the renew failed otherwise): begin anew,
    // which adopts the new size.
    mdb_txn_abort(txn);
    lock->unlock();
  }
  return BeginRead(lock);
}

void Index::GiveBack(MDB_txn* txn) const {
  mdb_txn_reset(txn);
  MutexLock spares(spare_mu_);
  if (spare_.size() < kSpares) {
    spare_.push_back(txn);
    return;
  }
  mdb_txn_abort(txn);
}

Result<void> Index::Read(const std::function<Result<void>(MDB_txn*)>& fn) const {
  std::shared_lock<std::shared_mutex> lock;
  AE_ASSIGN(MDB_txn* txn, TakeRead(&lock));
  Result<void> r = fn(txn);
  GiveBack(txn);
  return r;
}

Result<std::optional<ObjectInfo>> Index::Get(MDB_txn* txn, const ObjectId& id) const {
  trim_->Tick();
  MDB_val k = Val(id.bytes.data(), 32), v;
  int rc = mdb_get(txn, objects_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<ObjectInfo>();
  if (rc) return MdbFail(dir_, rc);
  if (v.mv_size != kObjectValue) {
    return Fail(ErrorCode::kCorrupt, dir_ + ": object " + id.Hex() + ": bad index entry");
  }
  return std::optional<ObjectInfo>(DecodeInfo(static_cast<const uint8_t*>(v.mv_data)));
}

Result<std::optional<ObjectInfo>> Index::Lookup(const ObjectId& id) const {
  std::optional<ObjectInfo> out;
  AE_TRY(Read([&](MDB_txn* txn) -> Result<void> {
    AE_ASSIGN(out, Get(txn, id));
    return {};
  }));
  return out;
}

Result<std::vector<ObjectId>> Index::Missing(std::span<const ObjectId> ids) const {
  std::vector<ObjectId> out;
  AE_TRY(Read([&](MDB_txn* txn) -> Result<void> {
    MDB_cursor* cur = nullptr;
    if (int rc = mdb_cursor_open(txn, objects_, &cur); rc) return MdbFail(dir_, rc);
    // A positioned cursor looks for the next key on its current leaf page
    // first: ascending ids walk the leaves forward instead of descending
    // from the root (and faulting a random page in) for each.
    int rc = 0;
    for (const ObjectId& id : ids) {
      trim_->Tick();
      MDB_val k = Val(id.bytes.data(), 32), v;
      rc = mdb_cursor_get(cur, &k, &v, MDB_SET);
      if (rc == MDB_NOTFOUND) {
        out.push_back(id);
        rc = 0;
      } else if (rc) {
        break;
      }
    }
    mdb_cursor_close(cur);
    if (rc) return MdbFail(dir_, rc);
    return {};
  }));
  return out;
}

Result<void> Index::Walk(MDB_txn* txn, const ObjectId* after, size_t limit,
                         const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn,
                         size_t* count) const {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, objects_, &cur);
  if (rc) return MdbFail(dir_, rc);
  MDB_val k, v;
  Result<void> r;
  *count = 0;
  if (after) {
    k = Val(after->bytes.data(), 32);
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    if (rc == 0 && k.mv_size == 32 && std::memcmp(k.mv_data, after->bytes.data(), 32) == 0) {
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
  } else {
    rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  }
  for (; rc == 0 && *count < limit; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != 32 || v.mv_size != kObjectValue) {
      r = Fail(ErrorCode::kCorrupt, dir_ + ": bad index entry");
      break;
    }
    ObjectId id;
    std::memcpy(id.bytes.data(), k.mv_data, 32);
    ++*count;
    trim_->Tick();
    r = fn(id, DecodeInfo(static_cast<const uint8_t*>(v.mv_data)));
    if (!r) break;
  }
  mdb_cursor_close(cur);
  if (r && rc != 0 && rc != MDB_NOTFOUND) return MdbFail(dir_, rc);
  return r;
}

Result<void> Index::ForEach(
    const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn) const {
  std::optional<ObjectId> after;
  for (;;) {
    std::vector<std::pair<ObjectId, ObjectInfo>> page;
    page.reserve(kForEachPage);
    size_t n = 0;
    AE_TRY(Read([&](MDB_txn* txn) {
      return Walk(txn, after ? &*after : nullptr, kForEachPage,
                  [&](const ObjectId& id, const ObjectInfo& info) -> Result<void> {
                    page.emplace_back(id, info);
                    return {};
                  },
                  &n);
    }));
    for (const auto& [id, info] : page) AE_TRY(fn(id, info));
    if (page.size() < kForEachPage) return {};
    after = page.back().first;
  }
}

class IndexViewImpl : public IndexView {
 public:
  explicit IndexViewImpl(const Index* ix) : ix_(ix) {}
  // A view is for a long scan: what it mapped is unmapped when it closes
  // (under lock_, so that the map does not move meanwhile), not left to
  // count against the process while it goes on with other maps.
  ~IndexViewImpl() override {
    if (!txn_) return;
    mdb_txn_abort(txn_);
    ix_->trim_->Trim();
  }
  const std::vector<PackInfo>& packs() const override { return packs_; }
  Result<std::optional<ObjectInfo>> Lookup(const ObjectId& id) const override { return ix_->Get(txn_, id); }
  Result<void> ForEach(
      const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn) const override {
    size_t n = 0;
    return ix_->Walk(txn_, nullptr, SIZE_MAX, fn, &n);
  }

 private:
  friend class Index;
  const Index* ix_;
  std::shared_lock<std::shared_mutex> lock_;  // released after the destructor aborts txn_
  MDB_txn* txn_ = nullptr;
  std::vector<PackInfo> packs_;
};

Result<std::unique_ptr<IndexView>> Index::OpenView() const {
  auto v = std::make_unique<IndexViewImpl>(this);
  AE_ASSIGN(v->txn_, BeginRead(&v->lock_));
  std::map<uint32_t, PackInfo> packs;
  AE_TRY(ReadPacks(v->txn_, &packs));
  for (const auto& [n, p] : packs) v->packs_.push_back(p);
  return std::unique_ptr<IndexView>(std::move(v));
}

Result<std::map<uint32_t, PackInfo>> Index::Packs() const {
  std::map<uint32_t, PackInfo> out;
  AE_TRY(Read([&](MDB_txn* txn) { return ReadPacks(txn, &out); }));
  return out;
}

Result<void> Index::ReadPacks(MDB_txn* txn, std::map<uint32_t, PackInfo>* packs) const {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, packs_, &cur);
  if (rc) return MdbFail(dir_, rc);
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != 4 || (v.mv_size != kPackValue && v.mv_size != kPackValueV1)) continue;
    auto* kb = static_cast<const uint8_t*>(k.mv_data);
    auto* vb = static_cast<const uint8_t*>(v.mv_data);
    PackInfo p;
    p.pack = uint32_t(kb[0]) << 24 | kb[1] << 16 | kb[2] << 8 | kb[3];
    p.committed = Get64(vb);
    p.objects = Get64(vb + 8);
    p.stored_bytes = Get64(vb + 16);
    p.logical_bytes = Get64(vb + 24);
    if (v.mv_size == kPackValue) {
      p.dead_objects = Get64(vb + 32);
      p.dead_stored_bytes = Get64(vb + 40);
      p.dead_logical_bytes = Get64(vb + 48);
    }
    (*packs)[p.pack] = p;
  }
  mdb_cursor_close(cur);
  if (rc != MDB_NOTFOUND) return MdbFail(dir_, rc);
  return {};
}

Result<std::optional<std::string>> Index::GetMeta(const std::string& key) const {
  std::optional<std::string> out;
  AE_TRY(Read([&](MDB_txn* txn) -> Result<void> {
    MDB_val k = Val(key.data(), key.size()), v;
    int rc = mdb_get(txn, meta_, &k, &v);
    if (rc == MDB_NOTFOUND) return {};
    if (rc) return MdbFail(dir_, rc);
    out = std::string(static_cast<const char*>(v.mv_data), v.mv_size);
    return {};
  }));
  return out;
}

Result<uint64_t> Index::ReadRemovals(MDB_txn* txn) const {
  MDB_val k = Val(kRemovalsKey.data(), kRemovalsKey.size()), v;
  int rc = mdb_get(txn, meta_, &k, &v);
  if (rc == MDB_NOTFOUND) return uint64_t{0};
  if (rc) return MdbFail(dir_, rc);
  uint64_t n = 0;
  for (size_t i = 0; i < v.mv_size; ++i) {
    char c = static_cast<const char*>(v.mv_data)[i];
    if (c < '0' || c > '9' || i >= 19) return Fail(ErrorCode::kCorrupt, dir_ + ": bad meta removals");
    n = n * 10 + uint64_t(c - '0');
  }
  return n;
}

Result<uint64_t> Index::Removals() const {
  uint64_t n = 0;
  AE_TRY(Read([&](MDB_txn* txn) -> Result<void> {
    AE_ASSIGN(n, ReadRemovals(txn));
    return {};
  }));
  return n;
}

Result<void> Index::TryApply(const Update& u, bool* map_full) {
  *map_full = false;
  std::shared_lock lock(resize_mu_);
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
  if (rc) return MdbFail(dir_, rc);
  auto fail = [&](int rc) -> Result<void> {
    mdb_txn_abort(txn);
    if (rc == MDB_MAP_FULL) {
      *map_full = true;
      return {};
    }
    return MdbFail(dir_, rc);
  };
  for (const ObjectId& id : u.removed) {
    trim_->Tick();
    MDB_val k = Val(id.bytes.data(), 32);
    rc = mdb_del(txn, objects_, &k, nullptr);
    if (rc && rc != MDB_NOTFOUND) return fail(rc);
  }
  if (!u.removed.empty()) {
    // Every commit that may remove an object counts itself (Removals).
    AE_ASSIGN(uint64_t n, ReadRemovals(txn));
    std::string next = std::to_string(n + 1);
    MDB_val k = Val(kRemovalsKey.data(), kRemovalsKey.size()), v = Val(next.data(), next.size());
    if ((rc = mdb_put(txn, meta_, &k, &v, 0))) return fail(rc);
  }
  for (const auto& [id, info] : u.objects) {
    trim_->Tick();
    uint8_t b[kObjectValue];
    EncodeInfo(info, b);
    MDB_val k = Val(id.bytes.data(), 32), v = Val(b, kObjectValue);
    if ((rc = mdb_put(txn, objects_, &k, &v, 0))) return fail(rc);
  }
  for (const PackInfo& p : u.packs) {
    auto key = PackKey(p.pack);
    uint8_t b[kPackValue];
    Put64(b, p.committed);
    Put64(b + 8, p.objects);
    Put64(b + 16, p.stored_bytes);
    Put64(b + 24, p.logical_bytes);
    Put64(b + 32, p.dead_objects);
    Put64(b + 40, p.dead_stored_bytes);
    Put64(b + 48, p.dead_logical_bytes);
    MDB_val k = Val(key.data(), 4), v = Val(b, kPackValue);
    if ((rc = mdb_put(txn, packs_, &k, &v, 0))) return fail(rc);
  }
  for (uint32_t n : u.removed_packs) {
    auto key = PackKey(n);
    MDB_val k = Val(key.data(), 4);
    rc = mdb_del(txn, packs_, &k, nullptr);
    if (rc && rc != MDB_NOTFOUND) return fail(rc);
  }
  for (const auto& [key, value] : u.meta) {
    MDB_val k = Val(key.data(), key.size()), v = Val(value.data(), value.size());
    if ((rc = mdb_put(txn, meta_, &k, &v, 0))) return fail(rc);
  }
  rc = mdb_txn_commit(txn);
  if (rc == MDB_MAP_FULL) {
    *map_full = true;
    return {};
  }
  if (rc) return MdbFail(dir_ + ": commit", rc);
  return {};
}

Result<void> Index::Apply(const Update& u) {
  for (;;) {
    bool full = false;
    AE_TRY(TryApply(u, &full));
    if (!full) return {};
    std::unique_lock excl(resize_mu_);
    MDB_envinfo info;
    mdb_env_info(env_, &info);
    int rc = mdb_env_set_mapsize(env_, info.me_mapsize * 2);
    if (rc) return MdbFail(dir_ + ": growing the map", rc);
  }
}

}  // namespace agentenv::store
