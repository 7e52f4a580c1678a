// Batch: deduplicating, parallel writes into append-only packs; one fsync
// and one index commit make a batch durable and visible. A batch of more
// than kStepObjects new objects commits them in steps as it goes, so its
// memory (pending index entries, LMDB dirty pages) does not grow with it.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <atomic>
#include <deque>
#include <future>
#include <set>
#include <unordered_map>

#include "common/mutex.h"
#include "store/codec.h"
#include "store/inspect.h"
#include "store/store_impl.h"

namespace agentenv::store {
Result<void> PwriteFull(int fd, const uint8_t* p, size_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    ssize_t r = ::pwrite(fd, p, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return FailErrno(path, errno);
    p += r;
    n -= r;
    off += r;
  }
  return {};
}

namespace {

// Writes a record's header and payload at `off` with one syscall (a short
// write, rare on a regular file, is finished piece by piece).
Result<void> WriteRecord(int fd, std::span<const uint8_t> header, std::span<const uint8_t> payload,
                         uint64_t off, const std::string& path) {
  iovec iov[2] = {{const_cast<uint8_t*>(header.data()), header.size()},
                  {const_cast<uint8_t*>(payload.data()), payload.size()}};
  ssize_t r;
  do {
    r = ::pwritev(fd, iov, 2, off_t(off));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return FailErrno(path, errno);
  size_t done = size_t(r);
  if (done < header.size()) {
    AE_TRY(PwriteFull(fd, header.data() + done, header.size() - done, off + done, path));
    done = header.size();
  }
  size_t p = done - header.size();
  return PwriteFull(fd, payload.data() + p, payload.size() - p, off + done, path);
}

// Reads up to n bytes (less only at EOF).
Result<size_t> ReadFull(int fd, uint8_t* p, size_t n, std::string_view path) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::read(fd, p + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return FailErrno(path, errno);
    if (r == 0) break;
    done += r;
  }
  return done;
}

class BatchImpl final : public Batch {
 public:
  BatchImpl(StoreImpl& s, UniqueFd lock, bool hash_only)
      : s_(s), lock_(std::move(lock)), cdc_(s.params().chunker), hash_only_(hash_only) {}
  ~BatchImpl() override;

  Result<void> Init();
  Result<ObjectId> Put(ObjectType t, std::span<const uint8_t> data) override;
  Result<ObjectId> Put(ObjectType t, std::span<const uint8_t> data, bool* was_stored) override;
  Result<FileRef> PutFile(int fd, std::string_view path) override;
  Result<void> Commit() override;
  uint64_t new_bytes() const override { return new_bytes_.load(); }
  Result<void> Drop(const ObjectId& id) override;
  Result<std::vector<uint8_t>> GetPending(const ObjectId& id) const override;

 private:
  struct OpenPack {
    UniqueFd fd;
    std::string path;
    bool created = false;  // by this batch: removed if the batch is abandoned
    uint64_t committed = 0;
  };
  // `was_stored` (may be null): see Batch::Put.
  Result<ObjectId> Store(ObjectType t, const ObjectId& id, std::span<const uint8_t> data,
                         bool* was_stored = nullptr);
  // Under mu_: creates a new pack file and returns its number. Errors: I/O.
  Result<uint32_t> NewPack() REQUIRES(mu_);
  // Under mu_, with no write in flight: makes the pending objects durable
  // and visible (fsyncs of the packs written to, then one index commit)
  // and forgets them. Drops go only with the `last` step (Commit's), so
  // they are atomic with the batch's last puts.
  Result<void> CommitPending(bool last) REQUIRES(mu_);

  // New objects after which the batch commits a step: ~100 bytes each of
  // pending_ plus the LMDB page each of their (random) ids dirties, up to
  // 4 KiB an object once the index is large: ~35 MB a step at most.
  static constexpr size_t kStepObjects = 8192;
  // New bytes up to which the batch appends to one pack, one append at a
  // time: each pack written costs the commit an fsync (on ext4 a journal
  // commit and a flush of its own), and a snapshot of a few changed files
  // written by two walkers touched two packs. Past this (an ingest) each
  // writer takes its own pack, as appends to one file serialize.
  static constexpr uint64_t kOnePackBytes = uint64_t{8} << 20;

  StoreImpl& s_;
  UniqueFd lock_;
  FastCdc cdc_;
  const bool hash_only_;  // computes ids, writes nothing, cannot commit
  std::atomic<uint64_t> new_bytes_{0};

  mutable Mutex mu_;
  Result<void> failed_ GUARDED_BY(mu_);  // first write error; the batch cannot commit after it
  bool committed_ GUARDED_BY(mu_) = false;
  // Appends under way (slot taken, record not yet written). A step waits
  // for them: the last one to finish commits it, and no new append starts
  // while `step_wanted_` (they wait on `step_done_`), nor while another is
  // under way in a batch still below kOnePackBytes.
  size_t writing_ GUARDED_BY(mu_) = 0;
  uint64_t slotted_bytes_ GUARDED_BY(mu_) = 0;  // new bytes given a slot so far
  bool step_wanted_ GUARDED_BY(mu_) = false;
  CondVar step_done_;
  uint64_t steps_ GUARDED_BY(mu_) = 0;  // steps committed: pending_ forgot what they held
  std::unordered_map<ObjectId, ObjectInfo, ObjectIdHash> pending_ GUARDED_BY(mu_);
  std::unordered_map<ObjectId, ObjectInfo, ObjectIdHash> drops_ GUARDED_BY(mu_);  // committed objects to remove
  std::map<uint32_t, PackInfo> packs_ GUARDED_BY(mu_);  // every pack known, with this batch's additions
  std::map<uint32_t, OpenPack> open_ GUARDED_BY(mu_);   // packs written by this batch
  // Open packs with room that no thread is appending to. Each Store takes
  // one for its append and gives it back: threads then write to different
  // files, because buffered writes to one file serialize on its inode lock
  // (that cost a third of a 2-core ingest's parallelism).
  std::vector<uint32_t> idle_ GUARDED_BY(mu_);
  uint32_t next_pack_ GUARDED_BY(mu_) = 1;
};

Result<void> BatchImpl::Init() {
  MutexLock lock(mu_);  // no other thread has the batch yet; taken for the analysis
  AE_ASSIGN(packs_, s_.index().Packs());
  AE_ASSIGN(next_pack_, s_.NextPackNumber());
  // Keep filling the newest packs that have room (as many as threads may
  // append at once), so small batches do not leave a trail of small packs.
  // Older packs with room stay as they are; compaction merges them.
  size_t reuse = s_.pool().size() + 2;
  for (auto it = packs_.rbegin(); it != packs_.rend() && idle_.size() < reuse; ++it) {
    const PackInfo& info = it->second;
    if (info.committed >= kPackTarget) continue;
    OpenPack p;
    p.path = PackPath(s_.dir(), info.pack);
    p.fd.reset(::open(p.path.c_str(), O_RDWR | O_CLOEXEC));
    if (!p.fd) return FailErrno(p.path, errno);
    p.committed = info.committed;
    open_.emplace(info.pack, std::move(p));
    idle_.push_back(info.pack);
  }
  // Oldest last: Store takes from the back, so the oldest fills up first.
  std::reverse(idle_.begin(), idle_.end());
  return {};
}

BatchImpl::~BatchImpl() {
  if (committed_) return;
  // Abandoned: give back what we appended. BeginBatch would do the same.
  for (auto& [n, p] : open_) {
    if (p.created) {
      ::unlink(p.path.c_str());
    } else if (::ftruncate(p.fd.get(), off_t(p.committed)) != 0) {
      // The next writer truncates the tail again; nothing else to do here.
    }
  }
}

Result<uint32_t> BatchImpl::NewPack() {
  uint32_t n = next_pack_++;
  OpenPack p;
  p.path = PackPath(s_.dir(), n);
  p.fd.reset(::open(p.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!p.fd) return FailErrno(p.path, errno);
  p.created = true;
  open_.emplace(n, std::move(p));
  packs_[n] = PackInfo{.pack = n};
  return n;
}

Result<ObjectId> BatchImpl::Put(ObjectType t, std::span<const uint8_t> data) {
  return Store(t, ObjectId::Of(data), data);
}

Result<ObjectId> BatchImpl::Put(ObjectType t, std::span<const uint8_t> data, bool* was_stored) {
  return Store(t, ObjectId::Of(data), data, was_stored);
}

Result<ObjectId> BatchImpl::Store(ObjectType t, const ObjectId& id, std::span<const uint8_t> data,
                                  bool* was_stored) {
  if (was_stored) *was_stored = false;
  if (hash_only_) {
    if (!was_stored) return id;
    AE_ASSIGN(*was_stored, s_.Has(id));
    return id;
  }
  uint64_t steps_seen;
  {
    MutexLock lock(mu_);
    if (!failed_) return Unexpected<Error>(failed_.error());
    if (committed_) return Fail(ErrorCode::kInvalid, s_.dir() + ": put after the batch committed");
    if (pending_.count(id)) return id;
    if (drops_.erase(id)) {  // dropped earlier in this batch: keep it after all
      if (was_stored) *was_stored = true;
      return id;
    }
    steps_seen = steps_;
  }
  AE_ASSIGN(auto known, s_.index().Lookup(id));
  if (was_stored) *was_stored = bool(known);
  if (known) return id;
  Encoded enc = Encode(data, s_.params().zstd_level);
  std::span<const uint8_t> payload = enc.codec == Codec::kRaw ? data : std::span(enc.bytes);

  ObjectInfo info{t, enc.codec, data.size(), payload.size(), 0, 0};
  int fd;
  std::string path;
  uint64_t end;
  {
    MutexLock lock(mu_);
    while (step_wanted_ || (writing_ != 0 && slotted_bytes_ < kOnePackBytes)) step_done_.wait(lock);
    AE_TRY(failed_);
    if (pending_.count(id)) return id;  // another thread stored it meanwhile
    if (steps_ != steps_seen) {  // ... and a step may have moved it to the index
      AE_ASSIGN(known, s_.index().Lookup(id));
      if (known) return id;
    }
    if (idle_.empty()) {
      Result<uint32_t> n = NewPack();
      if (!n) {
        failed_ = Unexpected<Error>(n.error());
        return Unexpected<Error>(n.error());
      }
      idle_.push_back(*n);
    }
    info.pack = idle_.back();  // the one given back last
    idle_.pop_back();
    slotted_bytes_ += data.size();
    PackInfo& p = packs_[info.pack];
    info.offset = RecordSlot(p.committed, enc.codec, payload.size());
    end = info.offset + kRecordHeaderSize + payload.size();
    pending_.emplace(id, info);
    p.committed = end;
    p.objects++;
    p.stored_bytes += payload.size();
    p.logical_bytes += data.size();
    fd = open_[info.pack].fd.get();
    path = open_[info.pack].path;
    ++writing_;
  }
  new_bytes_ += data.size();
  auto h = EncodeRecordHeader(RecordHeader{t, enc.codec, data.size(), payload.size(), id});
  Result<void> w = WriteRecord(fd, h, payload, info.offset, path);
  MutexLock lock(mu_);
  --writing_;
  if (end < kPackTarget) idle_.push_back(info.pack);  // a full pack is done
  if (writing_ == 0) step_done_.notify_all();  // for appends waiting to be the only one
  if (!w && failed_) failed_ = w;
  if (pending_.size() >= kStepObjects) step_wanted_ = true;
  if (step_wanted_ && writing_ == 0) {
    if (failed_) {
      Result<void> c = CommitPending(false);
      if (!c) failed_ = c;
    }
    step_wanted_ = false;
    step_done_.notify_all();
  }
  if (!w) return Unexpected<Error>(w.error());
  AE_TRY(failed_);
  return id;
}

Result<FileRef> BatchImpl::PutFile(int fd, std::string_view path) {
  const StoreParams& prm = s_.params();
  const size_t max = prm.chunker.max_size;
  // Uninitialized: zero-filling 1 MiB per file was ~6% of an ingest.
  const size_t buf_size = std::max<size_t>(prm.small_file_max + 1, 4 * max);
  std::unique_ptr<uint8_t[]> storage(new uint8_t[buf_size]);
  std::span<uint8_t> buf(storage.get(), buf_size);
  AE_ASSIGN(size_t avail, ReadFull(fd, buf.data(), prm.small_file_max + 1, path));
  if (avail <= prm.small_file_max) {
    AE_ASSIGN(ObjectId id, Put(ObjectType::kChunk, std::span(buf.data(), avail)));
    return FileRef{id, ObjectType::kChunk, avail};
  }

  // Large file: cut chunks on this thread, hash+compress+write them on the
  // pool with a bounded number in flight, collect ids in order.
  const size_t max_in_flight = 2 * s_.pool().size() + 2;
  std::deque<std::pair<std::future<Result<ObjectId>>, uint64_t>> in_flight;
  std::vector<ManifestEntry> chunks;
  auto collect_one = [&]() -> Result<void> {
    auto [fut, size] = std::move(in_flight.front());
    in_flight.pop_front();
    AE_ASSIGN(ObjectId id, fut.get());
    chunks.push_back(ManifestEntry{id, size});
    return {};
  };
  Result<void> err;
  size_t pos = 0;
  bool eof = false;
  uint64_t total = 0;
  while (err) {
    if (!eof && avail - pos < max) {  // refill: keep at least max bytes ahead
      std::memmove(buf.data(), buf.data() + pos, avail - pos);
      avail -= pos;
      pos = 0;
      auto got = ReadFull(fd, buf.data() + avail, buf.size() - avail, path);
      if (!got) {
        err = Unexpected<Error>(got.error());
        break;
      }
      eof = avail + *got < buf.size();
      avail += *got;
    }
    if (pos == avail) break;
    size_t cut = cdc_.NextCut(buf.data() + pos, avail - pos, eof);
    auto data = std::make_shared<std::vector<uint8_t>>(buf.data() + pos, buf.data() + pos + cut);
    pos += cut;
    total += cut;
    auto task = std::make_shared<std::packaged_task<Result<ObjectId>()>>([this, data] {
      return Store(ObjectType::kChunk, ObjectId::Of(*data), *data);
    });
    in_flight.emplace_back(task->get_future(), cut);
    s_.pool().Submit([task] { (*task)(); });
    if (in_flight.size() >= max_in_flight) err = collect_one();
  }
  // Drain even after an error: the tasks reference this batch.
  while (!in_flight.empty()) {
    Result<void> r = collect_one();
    if (err && !r) err = r;
  }
  AE_TRY(err);
  AE_ASSIGN(ObjectId mid, Put(ObjectType::kManifest, EncodeManifest(chunks)));
  return FileRef{mid, ObjectType::kManifest, total};
}

Result<void> BatchImpl::Drop(const ObjectId& id) {
  {
    MutexLock lock(mu_);
    AE_TRY(failed_);
    if (committed_) return Fail(ErrorCode::kInvalid, s_.dir() + ": drop after the batch committed");
    auto it = pending_.find(id);
    if (it != pending_.end()) {  // put by this batch: its record is dead on arrival
      packs_[it->second.pack].AddDead(it->second);
      pending_.erase(it);
      return {};
    }
  }
  // The index cannot change under us: this batch holds the writer lock.
  AE_ASSIGN(auto known, s_.index().Lookup(id));
  if (!known) return {};
  MutexLock lock(mu_);
  drops_.emplace(id, *known);
  return {};
}

Result<std::vector<uint8_t>> BatchImpl::GetPending(const ObjectId& id) const {
  ObjectInfo info;
  int fd = -1;
  std::string path;
  {
    MutexLock lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || committed_)
      return Fail(ErrorCode::kNotFound, "object " + id.Hex() + ": not pending in this batch");
    info = it->second;
    const OpenPack& p = open_.at(info.pack);
    fd = p.fd.get();  // open for the batch's life
    path = p.path;
  }
  // The record's bytes are in the page cache (written, not yet fsynced);
  // the pack's own fd reads them: the store's cached read-only fds name
  // only committed packs, and this one's number could still be reused if
  // the batch is abandoned.
  std::string where = "object " + id.Hex() + " (" + path + " offset " + std::to_string(info.offset) + ")";
  std::vector<uint8_t> rec(kRecordHeaderSize + info.stored_size);
  size_t done = 0;
  while (done < rec.size()) {
    ssize_t r = ::pread(fd, rec.data() + done, rec.size() - done, off_t(info.offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return FailErrno(where, errno);
    if (r == 0) return Fail(ErrorCode::kCorrupt, where + ": pack file too short");
    done += size_t(r);
  }
  auto h = ParseRecordHeader(std::span<const uint8_t, kRecordHeaderSize>(rec.data(), kRecordHeaderSize));
  if (!h) return Fail(ErrorCode::kCorrupt, where + ": " + h.error().message);
  if (h->id != id || h->codec != info.codec || h->size != info.size || h->stored_size != info.stored_size)
    return Fail(ErrorCode::kCorrupt, where + ": record header does not match what the batch wrote");
  auto data = Decode(info.codec, std::span(rec).subspan(kRecordHeaderSize), info.size);
  if (!data) return Fail(ErrorCode::kCorrupt, where + ": " + data.error().message);
  if (ObjectId::Of(*data) != id) return Fail(ErrorCode::kCorrupt, where + ": content does not match its id");
  return std::move(*data);
}

Result<void> BatchImpl::CommitPending(bool last) {
  Index::Update u;
  bool created = false;
  std::set<uint32_t> touched;
  for (auto& [n, p] : open_) {
    if (packs_[n].committed == p.committed && !p.created) continue;  // nothing new since the last step
    if (::fsync(p.fd.get()) != 0) return FailErrno(p.path, errno);
    created |= p.created;
    touched.insert(n);
  }
  if (created) {
    AE_TRY(FsyncDir(s_.dir() + "/packs"));
    u.meta.emplace_back("next_pack", std::to_string(next_pack_));
  }
  if (last) {
    for (const auto& [id, info] : drops_) {
      u.removed.push_back(id);
      packs_[info.pack].AddDead(info);
      touched.insert(info.pack);
    }
  }
  for (uint32_t n : touched) u.packs.push_back(packs_[n]);
  u.objects.assign(pending_.begin(), pending_.end());
  AE_TRY(s_.index().Apply(u));
  // What is committed now stays if the batch is abandoned later.
  for (auto& [n, p] : open_) {
    p.committed = packs_[n].committed;
    p.created = false;
  }
  pending_ = {};  // with its buckets: the point is the memory
  ++steps_;
  return {};
}

Result<void> BatchImpl::Commit() {
  if (hash_only_) return Fail(ErrorCode::kInvalid, s_.dir() + ": a hashing batch stores nothing and cannot commit");
  MutexLock lock(mu_);
  AE_TRY(failed_);
  if (committed_) return Fail(ErrorCode::kInvalid, s_.dir() + ": batch already committed");
  assert(writing_ == 0 && "Commit while a Put is under way");
  AE_TRY(CommitPending(true));
  committed_ = true;
  lock_.reset();  // the batch is done: let the next writer in
  return {};
}

}  // namespace

Result<std::unique_ptr<Batch>> MakeBatch(StoreImpl& s, UniqueFd lock_fd) {
  auto b = std::make_unique<BatchImpl>(s, std::move(lock_fd), false);
  AE_TRY(b->Init());
  return std::unique_ptr<Batch>(std::move(b));
}

std::unique_ptr<Batch> MakeHashingBatch(StoreImpl& s) {
  return std::make_unique<BatchImpl>(s, UniqueFd(), true);
}

std::unique_ptr<Batch> StoreImpl::HashingBatch() { return MakeHashingBatch(*this); }

}  // namespace agentenv::store
