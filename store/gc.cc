// gc: reclaiming the space of dropped objects by rewriting packs, and the
// salvage primitive fsck repair builds on. Protocol and crash argument:
// docs/store-format.md ("Compaction").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "store/codec.h"
#include "store/inspect.h"
#include "store/store_impl.h"

namespace agentenv::store {
namespace {

// Appends copied records to a new pack file, created on the first record.
// Until Commit the file is unknown to the index: removed here when
// abandoned, else by the next writer's clean-up.
class PackAppender {
 public:
  PackAppender(const std::string& dir, uint32_t n) : path_(PackPath(dir, n)) { info_.pack = n; }
  ~PackAppender() {
    if (fd_ && !committed_) ::unlink(path_.c_str());
  }

  Result<ObjectInfo> Append(const RecordHeader& h, std::span<const uint8_t> payload) {
    if (!fd_) {
      fd_.reset(::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (!fd_) return FailErrno(path_, errno);
    }
    uint64_t at = RecordSlot(info_.committed, h.codec, h.stored_size);
    auto hb = EncodeRecordHeader(h);
    AE_TRY(PwriteFull(fd_.get(), hb.data(), hb.size(), at, path_));
    AE_TRY(PwriteFull(fd_.get(), payload.data(), payload.size(), at + hb.size(), path_));
    info_.committed = at + kRecordHeaderSize + payload.size();
    info_.objects++;
    info_.stored_bytes += payload.size();
    info_.logical_bytes += h.size;
    return ObjectInfo{h.type, h.codec, h.size, h.stored_size, info_.pack, at};
  }
  bool created() const { return bool(fd_); }
  const PackInfo& info() const { return info_; }
  Result<void> Sync() {
    if (fd_ && ::fsync(fd_.get()) != 0) return FailErrno(path_, errno);
    return {};
  }
  void MarkCommitted() { committed_ = true; }

 private:
  std::string path_;
  UniqueFd fd_;
  PackInfo info_;
  bool committed_ = false;
};

// Decodes and hashes a record. Returns the reason it is bad, or "".
std::string VerifyRecord(const RecordHeader& h, std::span<const uint8_t> payload) {
  auto data = Decode(h.codec, payload, h.size);
  if (!data) return data.error().message;
  if (ObjectId::Of(*data) != h.id) return "content does not match its id";
  return "";
}

struct GroupResult {
  uint32_t packs_rewritten = 0;
  uint64_t objects_moved = 0;
  uint64_t bytes_freed = 0;
  std::vector<LostObject> lost;
};

// With the writer lock held: moves the live records of `group` into one
// new pack, commits, deletes the group's pack files. Normal mode copies
// exactly the records the index points at and refuses (kCorrupt, nothing
// changed) when a pack disagrees with its accounting. Salvage mode (fsck
// repair) copies the first verified record of every object indexed in
// the group and drops the rest from the index.
Result<GroupResult> RewriteGroup(StoreImpl& s, const std::vector<uint32_t>& group, bool salvage,
                                 const std::function<void(uint64_t bytes)>& copied_bytes) {
  Index& index = s.index();
  AE_ASSIGN(auto packs, index.Packs());
  AE_ASSIGN(uint32_t out_n, s.NextPackNumber());
  PackAppender out(s.dir(), out_n);
  const std::set<uint32_t> in_group(group.begin(), group.end());
  std::unordered_set<ObjectId, ObjectIdHash> copied;
  std::unordered_map<ObjectId, std::string, ObjectIdHash> bad;  // salvage: why a copy was refused
  Index::Update u;
  GroupResult res;
  uint64_t old_bytes = 0;

  for (uint32_t p : group) {
    auto row = packs.find(p);
    if (row == packs.end()) continue;  // compacted meanwhile by another process
    const PackInfo& info = row->second;
    u.removed_packs.push_back(p);
    std::string path = PackPath(s.dir(), p);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
      if (salvage && errno == ENOENT) continue;
      return FailErrno(path, errno);
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return FailErrno(path, errno);
    old_bytes += st.st_size;
    uint64_t live = 0;
    auto on_record = [&](const ScannedRecord& r) -> Result<void> {
      const RecordHeader& h = r.header;
      AE_ASSIGN(auto where, index.Lookup(h.id));
      if (!where) return {};  // dropped: dead record
      if (salvage) {
        if (!in_group.count(where->pack) || copied.count(h.id)) return {};
        std::string why = VerifyRecord(h, r.payload);
        if (!why.empty()) {
          bad[h.id] = path + " offset " + std::to_string(r.offset) + ": " + why;
          return {};
        }
      } else {
        if (where->pack != p || where->offset != r.offset) return {};  // an older copy
        if (where->size != h.size || where->stored_size != h.stored_size ||
            where->codec != h.codec) {
          return Fail(ErrorCode::kCorrupt, path + " offset " + std::to_string(r.offset) +
                                               ": record header does not match the index");
        }
      }
      AE_ASSIGN(ObjectInfo moved, out.Append(h, r.payload));
      u.objects.emplace_back(h.id, moved);
      copied.insert(h.id);
      ++live;
      if (copied_bytes) copied_bytes(kRecordHeaderSize + h.stored_size);
      return {};
    };
    auto on_damage = [&](uint64_t off, const std::string& what) -> Result<void> {
      if (salvage) return {};
      return Fail(ErrorCode::kCorrupt, path + " offset " + std::to_string(off) + ": " + what +
                                           " (run fsck repair)");
    };
    AE_TRY(ScanPack(fd.get(), info.committed, on_record, on_damage));
    if (!salvage && live != info.objects - info.dead_objects) {
      return Fail(ErrorCode::kCorrupt,
                  path + ": " + std::to_string(live) + " live records, the index counts " +
                      std::to_string(info.objects - info.dead_objects) + " (run fsck repair)");
    }
  }
  if (salvage) {
    // Objects indexed in the group without a good copy are lost: drop them
    // so that the index only names readable objects.
    AE_TRY(index.ForEach([&](const ObjectId& id, const ObjectInfo& info) -> Result<void> {
      if (!in_group.count(info.pack) || copied.count(id)) return {};
      auto b = bad.find(id);
      res.lost.push_back(LostObject{
          id, b != bad.end() ? b->second
                             : PackPath(s.dir(), info.pack) + " offset " +
                                   std::to_string(info.offset) + ": no valid record"});
      u.removed.push_back(id);
      return {};
    }));
  }
  if (u.removed_packs.empty() && u.removed.empty()) return res;

  if (out.created()) {
    AE_TRY(out.Sync());
    AE_TRY(FsyncDir(s.dir() + "/packs"));
    u.packs.push_back(out.info());
    u.meta.emplace_back("next_pack", std::to_string(out_n + 1));
  }
  // The commit point: from here the index names the new copies only.
  AE_TRY(index.Apply(u));
  out.MarkCommitted();
  for (uint32_t p : u.removed_packs) {
    s.ForgetPack(p);
    std::string path = PackPath(s.dir(), p);
    // A failure leaves a file the index does not know: the next writer's
    // clean-up removes it.
    ::unlink(path.c_str());
  }
  AE_TRY(FsyncDir(s.dir() + "/packs"));
  res.packs_rewritten = uint32_t(u.removed_packs.size());
  res.objects_moved = copied.size();
  uint64_t written = out.created() ? out.info().committed : 0;
  res.bytes_freed = old_bytes > written ? old_bytes - written : 0;
  return res;
}

}  // namespace

Result<CompactResult> StoreImpl::Compact(
    const CompactOptions& opts, const std::function<void(const CompactProgress&)>& progress) {
  AE_ASSIGN(auto packs, index_->Packs());
  // Plan without the lock; RewriteGroup re-reads the rows it acts on.
  std::vector<uint32_t> chosen;
  for (const auto& [n, p] : packs) {
    if (p.dead_objects == 0) continue;
    if (p.objects == p.dead_objects ||
        double(p.dead_stored_bytes) >= opts.min_dead_fraction * double(p.stored_bytes)) {
      chosen.push_back(n);
    }
  }

  std::vector<std::vector<uint32_t>> groups;
  uint64_t group_live = 0;
  for (uint32_t n : chosen) {
    const PackInfo& p = packs[n];
    if (groups.empty() || group_live >= kPackTarget) {
      groups.emplace_back();
      group_live = 0;
    }
    groups.back().push_back(n);
    group_live += p.stored_bytes - p.dead_stored_bytes;
  }

  CompactResult res;
  CompactProgress prog;
  prog.packs_total = uint32_t(chosen.size());
  for (const auto& g : groups) {
    // One lock per group: batches of other writers get in between.
    AE_ASSIGN(UniqueFd lock, LockWriters());
    AE_ASSIGN(GroupResult r, RewriteGroup(*this, g, false, [&](uint64_t b) {
      prog.bytes_copied += b;
    }));
    res.packs_rewritten += r.packs_rewritten;
    res.objects_moved += r.objects_moved;
    res.bytes_freed += r.bytes_freed;
    prog.packs_done += g.size();
    if (progress) progress(prog);
  }
  return res;
}

Result<SalvageResult> SalvagePacks(Store& store, const std::vector<uint32_t>& packs) {
  auto& s = static_cast<StoreImpl&>(store);
  AE_ASSIGN(UniqueFd lock, s.LockWriters());
  AE_ASSIGN(GroupResult r, RewriteGroup(s, packs, true, {}));
  SalvageResult out;
  out.packs_rewritten = r.packs_rewritten;
  out.objects_kept = r.objects_moved;
  out.lost = std::move(r.lost);
  return out;
}

}  // namespace agentenv::store
