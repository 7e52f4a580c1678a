#include "fsck/fsck.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <span>
#include <thread>
#include <unordered_map>

#include "common/unique_fd.h"
#include "store/codec.h"
#include "store/manifest.h"
#include "store/worker_pool.h"

namespace agentenv::fsck {
namespace {

using store::ObjectId;

struct IdHash {
  size_t operator()(const ObjectId& id) const {
    size_t h;
    std::memcpy(&h, id.bytes.data(), sizeof h);
    return h;
  }
};

enum class State : uint8_t { kUnseen, kFound, kBad, kMissing };

struct Entry {
  store::ObjectInfo info;
  State state = State::kUnseen;  // written by one task each, read after Drain
};

// Caps the payload bytes queued for hashing so memory stays bounded.
class InFlight {
 public:
  explicit InFlight(uint64_t cap) : cap_(cap) {}
  // False when the cap is reached: the caller then does the work itself.
  bool TryAcquire(uint64_t n) {
    std::lock_guard lock(mu_);
    if (used_ != 0 && used_ + n > cap_) return false;
    used_ += n;
    return true;
  }
  void Release(uint64_t n) {
    {
      std::lock_guard lock(mu_);
      used_ -= n;
    }
    cv_.notify_all();
  }
  void Drain() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return used_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t cap_, used_ = 0;
};

// Deterministic by id: the same chunks are sampled on every run.
bool Sampled(const ObjectId& id, double percent) {
  if (percent >= 100) return true;
  uint32_t v = uint32_t(id.bytes[0]) << 24 | id.bytes[1] << 16 | id.bytes[2] << 8 | id.bytes[3];
  return double(v % 10000) < percent * 100;
}

class Checker {
 public:
  Checker(const store::Store& s, const FsckOptions& o, const FsckCallbacks& cb)
      : s_(s), opts_(o), cb_(cb), in_flight_(uint64_t{64} << 20) {}
  Result<FsckReport> Run();

 private:
  void Report(Severity sev, std::string kind, std::optional<ObjectId> id,
              std::optional<uint32_t> pack, std::optional<uint64_t> offset, std::string what);
  Result<void> ScanOne(const store::PackInfo& p);
  void Verify(Entry* e, const ObjectId& id, const store::RecordHeader& h, uint32_t pack,
              uint64_t offset, std::span<const uint8_t> payload);
  void ResolveUnseen();
  void CheckManifests();

  const store::Store& s_;
  const FsckOptions& opts_;
  const FsckCallbacks& cb_;
  std::mutex report_mu_;  // report_, manifests_ and the finding callback
  FsckReport report_;
  FsckProgress progress_;
  std::unordered_map<ObjectId, Entry, IdHash> entries_;
  std::set<uint32_t> vanished_;  // packs deleted by a compaction during the check
  std::vector<ObjectId> manifests_;
  InFlight in_flight_;
  std::unique_ptr<store::WorkerPool> pool_;
};

void Checker::Report(Severity sev, std::string kind, std::optional<ObjectId> id,
                     std::optional<uint32_t> pack, std::optional<uint64_t> offset,
                     std::string what) {
  std::lock_guard lock(report_mu_);
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

void Checker::Verify(Entry* e, const ObjectId& id, const store::RecordHeader& h, uint32_t pack,
                     uint64_t offset, std::span<const uint8_t> payload) {
  auto actual = store::HashDecoded(h.codec, payload, h.size);
  if (!actual) {
    e->state = State::kBad;
    Report(Severity::kError, "decode-error", id, pack, offset, actual.error().message);
  } else if (*actual != id) {
    e->state = State::kBad;
    Report(Severity::kError, "hash-mismatch", id, pack, offset,
           "content hashes to " + actual->Hex());
  } else {
    std::lock_guard lock(report_mu_);
    report_.objects_verified++;
    report_.bytes_verified += h.size;
    if (h.type == store::ObjectType::kManifest) manifests_.push_back(id);
  }
}

Result<void> Checker::ScanOne(const store::PackInfo& p) {
  std::string path = store::PackPath(s_.dir(), p.pack);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    int e = errno;
    if (e == ENOENT) {
      AE_ASSIGN(auto now, store::ListPacks(s_));
      bool still = false;
      for (const auto& q : now) still |= q.pack == p.pack;
      if (!still) {  // compacted after our snapshot: its objects moved
        vanished_.insert(p.pack);
        progress_.bytes_done += p.committed;
        return {};
      }
    }
    Report(Severity::kError, "pack-missing", std::nullopt, p.pack, std::nullopt,
           std::string("cannot open: ") + std::strerror(e));
    return {};
  }
  const bool verify = opts_.verify_content;
  std::shared_ptr<const store::PackMapping> map;  // while verifying: the pack's bytes
  // Records go to the workers in groups of about 1 MiB: one task per small
  // record cost more in wake-ups than its hashing.
  constexpr uint64_t kGroupBytes = 1 << 20;
  struct Job {
    Entry* e;
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
      for (const Job& j : group) Verify(j.e, j.h.id, j.h, p.pack, j.offset, j.payload);
    } else {
      pool_->Submit([this, map, n, pack = p.pack, jobs = std::move(group)] {
        for (const Job& j : jobs) Verify(j.e, j.h.id, j.h, pack, j.offset, j.payload);
        in_flight_.Release(n);
      });
    }
    group.clear();
    group_bytes = 0;
  };
  uint64_t records = 0, stored = 0, logical = 0, unindexed = 0, last_progress = 0;
  auto on_record = [&](const store::ScannedRecord& r) -> Result<void> {
    const store::RecordHeader& h = r.header;
    ++records;
    stored += h.stored_size;
    logical += h.size;
    auto it = entries_.find(h.id);
    if (it == entries_.end() || it->second.info.pack != p.pack ||
        it->second.info.offset != r.offset) {
      ++unindexed;  // a dropped object's record (or an older copy)
    } else {
      Entry& e = it->second;
      const store::ObjectInfo& info = e.info;
      e.state = State::kFound;
      if (h.type != info.type || h.codec != info.codec || h.size != info.size ||
          h.stored_size != info.stored_size) {
        e.state = State::kBad;
        Report(Severity::kError, "index-mismatch", h.id, p.pack, r.offset,
               "index entry does not match the record header");
      } else if (verify && (h.type != store::ObjectType::kChunk ||
                            Sampled(h.id, opts_.subset_percent))) {
        group.push_back(Job{&e, h, r.offset, r.payload});
        group_bytes += r.payload.size();
        if (group_bytes >= kGroupBytes) flush();
      }
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
    r = store::ScanPackMapping(*map, p.committed, on_record, on_damage);
    flush();
    map.reset();  // the verify tasks hold it as long as they need it
  } else {
    r = store::ScanPack(fd.get(), p.committed, on_record, on_damage, false);
  }
  if (!r) return Wrap(path, r.error());
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
void Checker::ResolveUnseen() {
  for (auto& [id, e] : entries_) {
    if (e.state != State::kUnseen) continue;
    if (vanished_.count(e.info.pack)) {
      auto now = s_.Stat(id);
      bool dropped_since = !now && now.error().code == ErrorCode::kNotFound;
      if (dropped_since || (now && (!opts_.verify_content || s_.Get(id)))) {
        e.state = State::kFound;
        continue;
      }
    }
    e.state = State::kMissing;
    Report(Severity::kError, "missing-record", id, e.info.pack, e.info.offset,
           "indexed object has no valid record at its location");
  }
}

void Checker::CheckManifests() {
  for (const ObjectId& m : manifests_) {
    const Entry& me = entries_.at(m);
    auto payload = s_.Get(m);
    if (!payload) {
      Report(Severity::kError, "bad-manifest", m, std::nullopt, std::nullopt,
             payload.error().message);
      continue;
    }
    auto chunks = store::DecodeManifest(*payload);
    if (!chunks) {
      Report(Severity::kError, "bad-manifest", m, me.info.pack, me.info.offset,
             chunks.error().message);
      continue;
    }
    for (const auto& c : *chunks) {
      auto ci = entries_.find(c.id);
      if (ci == entries_.end() || ci->second.state == State::kMissing ||
          ci->second.state == State::kBad) {
        Report(Severity::kError, "missing-chunk", m, me.info.pack, me.info.offset,
               "chunk " + c.id.Hex() + " is not stored intact");
      } else if (ci->second.info.size != c.size) {
        Report(Severity::kError, "bad-manifest", m, me.info.pack, me.info.offset,
               "chunk " + c.id.Hex() + " has another size than the manifest says");
      }
    }
  }
}

Result<FsckReport> Checker::Run() {
  std::vector<store::PackInfo> packs;
  std::set<uint32_t> known;
  AE_TRY(store::ReadIndexSnapshot(s_, &packs, [&](const ObjectId& id, const store::ObjectInfo& info) {
    entries_.try_emplace(id, Entry{info});
    return Result<void>();
  }));
  report_.objects = entries_.size();
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
  Result<void> scanned;
  for (const auto& p : packs) {
    ++report_.packs;
    scanned = ScanOne(p);
    if (!scanned) break;
  }
  in_flight_.Drain();
  pool_.reset();  // joins: every Verify is done
  AE_TRY(scanned);
  if (cb_.progress) cb_.progress(progress_);
  ResolveUnseen();
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
