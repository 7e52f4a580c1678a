#include "fsck/fsck.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <span>
#include <thread>
#include <map>
#include <memory>

#include "common/mutex.h"
#include "common/unique_fd.h"
#include "store/codec.h"
#include "store/manifest.h"
#include "store/worker_pool.h"

namespace agentenv::fsck {
namespace {

using store::ObjectId;

// A verified manifest, checked against its chunks once every pack is read.
struct ManifestAt {
  ObjectId id;
  uint32_t pack;
  uint64_t offset;
};

// Caps the payload bytes queued for hashing so memory stays bounded.
class InFlight {
 public:
  explicit InFlight(uint64_t cap) : cap_(cap) {}
  // False when the cap is reached: the caller then does the work itself.
  bool TryAcquire(uint64_t n) {
    MutexLock lock(mu_);
    if (used_ != 0 && used_ + n > cap_) return false;
    used_ += n;
    return true;
  }
  void Release(uint64_t n) {
    {
      MutexLock lock(mu_);
      used_ -= n;
    }
    cv_.notify_all();
  }
  void Drain() {
    MutexLock lock(mu_);
    while (used_ != 0) cv_.wait(lock);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  const uint64_t cap_;
  uint64_t used_ GUARDED_BY(mu_) = 0;
};

// Deterministic by id: the same chunks are sampled on every run.
bool Sampled(const ObjectId& id, double percent) {
  if (percent >= 100) return true;
  uint32_t v = uint32_t(id.bytes[0]) << 24 | id.bytes[1] << 16 | id.bytes[2] << 8 | id.bytes[3];
  return double(v % 10000) < percent * 100;
}

// An index entry as the pack scan matches it with a record.
struct Indexed {
  ObjectId id;
  uint64_t offset, size, stored_size;
  uint32_t pack;
  store::ObjectType type;
  store::Codec codec;
};

class Checker {
 public:
  Checker(const store::Store& s, const FsckOptions& o, const FsckCallbacks& cb)
      : s_(s), opts_(o), cb_(cb), in_flight_(kInFlightBytes) {}
  Result<FsckReport> Run();

 private:
  void Report(Severity sev, std::string kind, std::optional<ObjectId> id,
              std::optional<uint32_t> pack, std::optional<uint64_t> offset, std::string what);
  // Scans pack p; `entries`: the index entries pointing into it, by offset.
  Result<void> ScanOne(const store::PackInfo& p, std::span<const Indexed> entries);
  void Verify(const ObjectId& id, const store::RecordHeader& h, uint32_t pack, uint64_t offset,
              std::span<const uint8_t> payload);
  Result<void> ResolveUnseen();
  void CheckManifests();
  void MarkBad(const ObjectId& id) {
    MutexLock lock(report_mu_);
    bad_.insert(id);
  }
  bool IsBad(const ObjectId& id) {
    MutexLock lock(report_mu_);
    return bad_.count(id) != 0;
  }

  const store::Store& s_;
  const FsckOptions& opts_;
  const FsckCallbacks& cb_;
  // The counters of report_ that the verifying threads add to, manifests_,
  // bad_ and the finding callback. (The other counters of report_ are the
  // pack scan's own, on the calling thread.)
  Mutex report_mu_;
  FsckReport report_;
  FsckProgress progress_;
  // Index entries are matched with the records as the packs are read,
  // neither loaded whole (memory would grow with the store) nor looked up
  // per record (a random read of the LMDB map each, at a million objects
  // mostly a page fault): the packs go in groups of about kGroupEntries
  // objects (FsckOptions::group_entries), one walk of view_ collects the
  // entries pointing into a group's packs, sorted by place, and each
  // pack's scan merges them with its records (both in offset order).
  static constexpr uint64_t kGroupEntries = uint64_t{1} << 18;  // 256k: 16 MB
  // Collects group_: the entries pointing into packs [first, last]; the
  // first walk also counts every entry and takes the ones pointing into
  // no known pack as unseen.
  Result<void> Collect(uint32_t first, uint32_t last, uint64_t expected, bool first_walk,
                       const std::set<uint32_t>& known);
  void Unseen(const Indexed& e) {
    unseen_.emplace_back(e.id, store::ObjectInfo{e.type, e.codec, e.size, e.stored_size, e.pack, e.offset});
  }
  std::unique_ptr<store::IndexView> view_;
  std::vector<Indexed> group_;  // by (pack, offset)
  // Index entries no record matched: resolved once the view is closed.
  std::vector<std::pair<ObjectId, store::ObjectInfo>> unseen_;
  std::vector<store::PackInfo> unopened_;  // gone (ENOENT): compacted meanwhile, or missing
  std::set<uint32_t> vanished_;  // packs deleted by a compaction during the check
  std::set<ObjectId> bad_ GUARDED_BY(report_mu_);  // indexed objects whose record is wrong
  std::set<ObjectId> missing_;   // indexed objects with no record
  std::vector<ManifestAt> manifests_ GUARDED_BY(report_mu_);
  // Payload bytes handed to the workers and not yet hashed. A pack's pages
  // further behind the scan than that (plus the group being filled and a
  // margin) are done with: ScanPackMapping unmaps them.
  static constexpr uint64_t kInFlightBytes = uint64_t{16} << 20;
  static constexpr uint64_t kKeepBehind = kInFlightBytes + (uint64_t{8} << 20);
  InFlight in_flight_;
  std::unique_ptr<store::WorkerPool> pool_;
};

void Checker::Report(Severity sev, std::string kind, std::optional<ObjectId> id,
                     std::optional<uint32_t> pack, std::optional<uint64_t> offset,
                     std::string what) {
  MutexLock lock(report_mu_);
  (sev == Severity::kError ? report_.errors : report_.warnings)++;
  if (!cb_.finding) return;
  std::string msg;
  if (id) msg += "object " + id->Hex() + " ";
  if (pack) {
    msg += "(" + store::PackPath(s_.dir(), *pack);
    if (offset) msg += " offset " + std::to_string(*offset);
    msg += ") ";
  }
  msg += kind + ": " + what;
  cb_.finding(FsckFinding{sev, std::move(kind), id, pack, offset, std::move(msg)});
}

void Checker::Verify(const ObjectId& id, const store::RecordHeader& h, uint32_t pack, uint64_t offset,
                     std::span<const uint8_t> payload) {
  auto actual = store::HashDecoded(h.codec, payload, h.size);
  if (!actual) {
    MarkBad(id);
    Report(Severity::kError, "decode-error", id, pack, offset, actual.error().message);
  } else if (*actual != id) {
    MarkBad(id);
    Report(Severity::kError, "hash-mismatch", id, pack, offset,
           "content hashes to " + actual->Hex());
  } else {
    MutexLock lock(report_mu_);
    report_.objects_verified++;
    report_.bytes_verified += h.size;
    if (h.type == store::ObjectType::kManifest) manifests_.push_back({id, pack, offset});
  }
}

Result<void> Checker::ScanOne(const store::PackInfo& p, std::span<const Indexed> entries) {
  std::string path = store::PackPath(s_.dir(), p.pack);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    int e = errno;
    for (const Indexed& x : entries) Unseen(x);
    if (e == ENOENT) {  // told apart once the view is closed (Run)
      unopened_.push_back(p);
      progress_.bytes_done += p.committed;
      return {};
    }
    Report(Severity::kError, "pack-missing", std::nullopt, p.pack, std::nullopt,
           std::string("cannot open: ") + std::strerror(e));
    return {};
  }
  const bool verify = opts_.verify_content;
  std::shared_ptr<const store::PackMapping> map;  // while verifying: the pack's bytes
  // Records go to the workers in groups of about 1 MiB (payload and job
  // together: a million tiny records queued are 100 MB of jobs): one task
  // per small record cost more in wake-ups than its hashing.
  constexpr uint64_t kGroupBytes = 1 << 20;
  struct Job {
    store::RecordHeader h;
    uint64_t offset;
    std::span<const uint8_t> payload;  // the mapped page cache itself: no copy
  };
  std::vector<Job> group;
  uint64_t group_bytes = 0;
  auto flush = [&] {
    if (group.empty()) return;
    uint64_t n = group_bytes;
    if (!in_flight_.TryAcquire(n)) {  // the workers are busy: help
      for (const Job& j : group) Verify(j.h.id, j.h, p.pack, j.offset, j.payload);
    } else {
      pool_->Submit([this, map, n, pack = p.pack, jobs = std::move(group)] {
        for (const Job& j : jobs) Verify(j.h.id, j.h, pack, j.offset, j.payload);
        in_flight_.Release(n);
      });
    }
    group.clear();
    group_bytes = 0;
  };
  uint64_t records = 0, stored = 0, logical = 0, unindexed = 0, last_progress = 0;
  size_t next = 0;  // entries before it are matched or unseen
  auto on_record = [&](const store::ScannedRecord& r) -> Result<void> {
    const store::RecordHeader& h = r.header;
    ++records;
    stored += h.stored_size;
    logical += h.size;
    // The entries at offsets before this record point at no record start.
    while (next < entries.size() && entries[next].offset < r.offset) Unseen(entries[next++]);
    const Indexed* entry = nullptr;
    for (; next < entries.size() && entries[next].offset == r.offset; ++next) {
      if (!entry && entries[next].id == h.id) entry = &entries[next];
      else Unseen(entries[next]);
    }
    if (!entry) {
      ++unindexed;  // a dropped object's record (or an older copy)
    } else if (h.type != entry->type || h.codec != entry->codec || h.size != entry->size ||
               h.stored_size != entry->stored_size) {
      MarkBad(h.id);
      Report(Severity::kError, "index-mismatch", h.id, p.pack, r.offset,
             "index entry does not match the record header");
    } else if (verify && (h.type != store::ObjectType::kChunk || Sampled(h.id, opts_.subset_percent))) {
      group.push_back(Job{h, r.offset, r.payload});
      group_bytes += r.payload.size() + sizeof(Job);
      if (group_bytes >= kGroupBytes) flush();
    }
    ++report_.records;
    uint64_t end = r.offset + store::kRecordHeaderSize + h.stored_size;
    progress_.bytes_done += end - last_progress;
    last_progress = end;
    progress_.records = report_.records;
    if (cb_.progress && report_.records % 1024 == 0) cb_.progress(progress_);
    return {};
  };
  auto on_damage = [&](uint64_t off, const std::string& what) -> Result<void> {
    Report(Severity::kError, what.find("shorter") != std::string::npos ? "pack-short" : "bad-record",
           std::nullopt, p.pack, off, what);
    return {};
  };
  Result<void> r;
  if (verify) {
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return FailErrno(path, errno);
    auto m = store::PackMapping::Map(fd.get(), std::min<uint64_t>(uint64_t(st.st_size), p.committed));
    if (!m) return Wrap(path, m.error());
    map = *m;
    r = store::ScanPackMapping(*map, p.committed, kKeepBehind, on_record, on_damage);
    flush();
    map.reset();  // the verify tasks hold it as long as they need it
  } else {
    r = store::ScanPack(fd.get(), p.committed, on_record, on_damage, false);
  }
  if (!r) return Wrap(path, r.error());
  for (; next < entries.size(); ++next) Unseen(entries[next]);  // past the last record
  progress_.bytes_done += p.committed - last_progress;
  report_.bytes_checked += p.committed;
  report_.dead_records += unindexed;
  if (records != p.objects || stored != p.stored_bytes || logical != p.logical_bytes) {
    Report(Severity::kError, "pack-accounting", std::nullopt, p.pack, std::nullopt,
           "index says " + std::to_string(p.objects) + " records/" +
               std::to_string(p.stored_bytes) + " stored bytes, pack has " +
               std::to_string(records) + "/" + std::to_string(stored));
  } else if (unindexed != p.dead_objects) {
    Report(Severity::kError, "pack-accounting", std::nullopt, p.pack, std::nullopt,
           "index counts " + std::to_string(p.dead_objects) + " dead records, pack has " +
               std::to_string(unindexed) + " records no index entry points at");
  }
  return {};
}

// Index entries no scanned record matched: moved by a concurrent
// compaction (re-read them where they are now) or missing.
Result<void> Checker::ResolveUnseen() {
  if (!unopened_.empty()) {
    AE_ASSIGN(auto now, store::ListPacks(s_));
    for (const store::PackInfo& p : unopened_) {
      bool still = false;
      for (const auto& q : now) still |= q.pack == p.pack;
      if (!still) {  // compacted after the view was opened: its objects moved
        vanished_.insert(p.pack);
        continue;
      }
      Report(Severity::kError, "pack-missing", std::nullopt, p.pack, std::nullopt,
             std::string("cannot open: ") + std::strerror(ENOENT));
    }
  }
  for (const auto& [id, info] : unseen_) {
    if (vanished_.count(info.pack)) {
      auto now = s_.Stat(id);
      bool dropped_since = !now && now.error().code == ErrorCode::kNotFound;
      if (dropped_since || (now && (!opts_.verify_content || s_.Get(id)))) continue;
    }
    missing_.insert(id);
    Report(Severity::kError, "missing-record", id, info.pack, info.offset,
           "indexed object has no valid record at its location");
  }
  return {};
}

// Chunks are looked up in the index as it is now: the view is closed.
void Checker::CheckManifests() {
  std::vector<ManifestAt> manifests;
  {
    MutexLock lock(report_mu_);
    manifests.swap(manifests_);
  }
  for (const ManifestAt& m : manifests) {
    auto payload = s_.Get(m.id);
    if (!payload) {
      Report(Severity::kError, "bad-manifest", m.id, std::nullopt, std::nullopt,
             payload.error().message);
      continue;
    }
    auto chunks = store::DecodeManifest(*payload);
    if (!chunks) {
      Report(Severity::kError, "bad-manifest", m.id, m.pack, m.offset, chunks.error().message);
      continue;
    }
    for (const auto& c : *chunks) {
      auto ci = s_.Stat(c.id);
      if (!ci || missing_.count(c.id) || IsBad(c.id)) {
        Report(Severity::kError, "missing-chunk", m.id, m.pack, m.offset,
               "chunk " + c.id.Hex() + " is not stored intact");
      } else if (ci->size != c.size) {
        Report(Severity::kError, "bad-manifest", m.id, m.pack, m.offset,
               "chunk " + c.id.Hex() + " has another size than the manifest says");
      }
    }
  }
}

Result<void> Checker::Collect(uint32_t first, uint32_t last, uint64_t expected, bool first_walk,
                              const std::set<uint32_t>& known) {
  group_.clear();
  group_.reserve(expected);
  AE_TRY(view_->ForEach([&](const ObjectId& id, const store::ObjectInfo& info) {
    if (first_walk) {
      ++report_.objects;
      if (!known.count(info.pack)) unseen_.emplace_back(id, info);
    }
    if (info.pack >= first && info.pack <= last && known.count(info.pack))
      group_.push_back(Indexed{id, info.offset, info.size, info.stored_size, info.pack, info.type, info.codec});
    return Result<void>();
  }));
  std::sort(group_.begin(), group_.end(), [](const Indexed& a, const Indexed& b) {
    return a.pack != b.pack ? a.pack < b.pack : a.offset < b.offset;
  });
  return {};
}

Result<FsckReport> Checker::Run() {
  AE_ASSIGN(view_, store::OpenIndexView(s_));
  const std::vector<store::PackInfo> packs = view_->packs();  // by pack number
  std::set<uint32_t> known;
  for (const auto& p : packs) {
    known.insert(p.pack);
    progress_.bytes_total += p.committed;
  }
  AE_ASSIGN(auto files, store::ListPackFiles(s_.dir()));
  for (uint32_t f : files) {
    if (!known.count(f)) {
      Report(Severity::kWarning, "unknown-pack-file", std::nullopt, f, std::nullopt,
             "not in the index (left by an interrupted writer; the next writer removes it)");
    }
  }
  unsigned threads = opts_.threads ? opts_.threads : std::max(1u, std::thread::hardware_concurrency());
  pool_ = std::make_unique<store::WorkerPool>(threads);
  // Groups of whole packs; a pack with more records than a group holds is
  // a group of its own. At least one walk, which counts the entries.
  const uint64_t group_entries = opts_.group_entries ? opts_.group_entries : kGroupEntries;
  Result<void> scanned;
  size_t begin = 0;
  do {
    size_t end = begin;
    uint64_t expected = 0;
    while (end < packs.size() && (end == begin || expected + packs[end].objects <= group_entries))
      expected += packs[end++].objects;
    scanned = Collect(end > begin ? packs[begin].pack : 1, end > begin ? packs[end - 1].pack : 0, expected,
                      begin == 0, known);
    std::span<const Indexed> rest(group_);
    for (size_t i = begin; scanned && i < end; ++i) {
      const store::PackInfo& p = packs[i];
      auto at = std::partition_point(rest.begin(), rest.end(), [&](const Indexed& e) { return e.pack == p.pack; });
      ++report_.packs;
      scanned = ScanOne(p, rest.first(size_t(at - rest.begin())));
      rest = rest.subspan(size_t(at - rest.begin()));
    }
    begin = end;
  } while (scanned && begin < packs.size());
  in_flight_.Drain();
  pool_.reset();  // joins: every Verify is done
  AE_TRY(scanned);
  std::vector<Indexed>().swap(group_);
  view_.reset();  // the store may be used again
  if (cb_.progress) cb_.progress(progress_);
  AE_TRY(ResolveUnseen());
  CheckManifests();
  return report_;
}

}  // namespace

Result<FsckReport> CheckStore(const store::Store& s, const FsckOptions& opts,
                              const FsckCallbacks& cb) {
  Checker c(s, opts, cb);
  return c.Run();
}

}  // namespace agentenv::fsck
