// The file writing of a restore (snap/restorer.h): queued files go out in
// batches, each file's whole sequence on a worker.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

#include "snap/fsops.h"
#include "snap/restorer.h"

namespace agentenv::snap::restore_internal {
namespace {

bool HasZeroBlock(const std::vector<uint8_t>& data) {
  static const uint8_t zero[4096] = {};
  for (size_t off = 0; off + sizeof zero <= data.size(); off += sizeof zero)
    if (std::memcmp(data.data() + off, zero, sizeof zero) == 0) return true;
  return false;
}

}  // namespace

void Restorer::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < n;) fn(k);
  };
  unsigned helpers = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()) - 1, n > 0 ? n - 1 : 0);
  if (helpers == 0) return work();
  if (!pool_) pool_ = std::make_unique<store::WorkerPool>(std::max(1u, std::thread::hardware_concurrency()) - 1);
  Mutex mu;
  CondVar cv;
  unsigned running = helpers;  // under mu
  for (unsigned t = 0; t < helpers; ++t)
    pool_->Submit([&] {
      work();
      MutexLock lock(mu);
      if (--running == 0) cv.notify_all();
    });
  work();
  MutexLock lock(mu);
  while (running != 0) cv.wait(lock);
}

void Restorer::SeedStat(int fd, const Entry& e, const std::string& rel) {
  struct stat st;
  if (::fstatat(fd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) SeedStat(e, rel, st);
}

void Restorer::SeedStat(const Entry& e, const std::string& rel, const struct stat& st) {
  // A later write sets mtime to its own time; only when the restored mtime
  // lies outside the current clock tick is that guaranteed to differ.
  if (e.meta.mtime_ns >= start_ns_ - kRacyWindowNs || !S_ISREG(st.st_mode)) return;
  StatEntry se{StatFields::Of(st, opt_.stat_dev), store::FileRef{e.id, e.content, e.size}};
  se.xattrs = e.meta.xattrs;
  // The cache holds xattrs as on disk: with the owner SetMeta recorded.
  if (st.st_uid != e.meta.uid || st.st_gid != e.meta.gid) PutOwnerXattr(&se.xattrs, e.meta.uid, e.meta.gid);
  stats.stat_entries.emplace_back(rel, std::move(se));
  const size_t n = stats.stat_entries.size();
  if (opt_.stat_sink && (n >= kStatBatchMax || (n >= kStatBatch && !SinkBusy()))) HandToSink();
}

void Restorer::HandToSink() {
  FinishSink();
  // Shared, so that the batch is still here if no thread can be had.
  auto batch = std::make_shared<std::vector<std::pair<std::string, StatEntry>>>(std::move(stats.stat_entries));
  stats.stat_entries.clear();
  try {
    sink_pending_ = std::async(std::launch::async, [sink = &opt_.stat_sink, batch] { return (*sink)(std::move(*batch)); });
  } catch (const std::system_error&) {  // hand it over on this thread
    Result<void> r = opt_.stat_sink(std::move(*batch));
    if (!r && sink_error_) sink_error_ = std::move(r);
  }
}

const Result<void>& Restorer::FinishSink() {
  if (sink_pending_.valid()) {
    Result<void> r = sink_pending_.get();
    if (!r && sink_error_) sink_error_ = std::move(r);
  }
  return sink_error_;
}


Result<void> Restorer::WriteFile(const DirFd& dir, const Entry& e, const std::string& rel) {
  int fd = dir->get();
  // A new read-only tree: a lower's identical file serves as it is.
  if (opt_.link_sources && opt_.sources && opt_.sources->LinkTo(rel, e, fd, e.name)) {
    ++stats.files_linked;
    Advance(opt_.progress, 1, e.size);
    return {};
  }
  auto q = std::make_unique<Queued>();
  q->dir = dir;
  q->file.dirfd = fd;
  q->file.in_place = opt_.fresh;
  q->file.tmp = opt_.fresh ? e.name : RestoreTempName(tmp_counter_++);
  q->file.name = e.name;
  q->file.rel = rel;
  q->entry = e;
  // Single-chunk files are written from memory in the batch; large files
  // stream from the store, reflinked files are cloned, and a file with a
  // zero block goes through WriteFileTo, which leaves a hole there.
  // An empty file is made as it is: no content to look for.
  q->stream = e.size > 0 && (opt_.reflink || opt_.sources || e.content != store::ObjectType::kChunk);
  if (!q->stream && e.size > 0) {
    AE_ASSIGN(q->file.data, s_.Get(e.id));
    q->stream = HasZeroBlock(q->file.data);
    if (q->stream) q->file.data.clear();
  }
  queued_bytes_ += q->file.data.size();
  queue_.push_back(std::move(q));
  bool many_dirs = HoldDir(dir);
  if (queue_.size() >= kMaxQueued || queued_bytes_ >= kMaxQueuedBytes || many_dirs) return Flush();
  return {};
}

Result<void> Restorer::Flush() {
  if (queue_.empty() && pending_meta_.empty()) return {};
  std::vector<std::unique_ptr<Queued>> batch = std::move(queue_);
  queue_.clear();
  queued_bytes_ = 0;
  queued_dirs_ = 0;
  last_queued_dir_ = nullptr;
  std::vector<How> how(batch.size(), How::kWritten);
  std::vector<uint8_t> clean(batch.size(), 0);  // not vector<bool>: written from several threads
  Result<void> r = io_.uring() ? WriteBatched(batch, how, clean) : WriteEach(batch, how, clean);
  if (!r) {
    for (auto& q : batch)
      if (q->file.created) ::unlinkat(q->file.dirfd, q->file.tmp.c_str(), 0);
    return r;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const Queued& q = *batch[i];
    ++stats.files_written;
    stats.bytes_written += q.entry.size;
    Advance(opt_.progress, 1, q.entry.size);
    if (how[i] == How::kCloned) ++stats.files_cloned;
    if (how[i] == How::kCopied) ++stats.files_copied;
    if (clean[i]) SeedStat(q.entry, q.file.rel, q.file.st);
  }
  std::vector<PendingMeta> dirs = std::move(pending_meta_);
  pending_meta_.clear();
  for (const PendingMeta& d : dirs) AE_TRY(SetMeta(d.parent->get(), d.entry, d.rel));
  return {};
}

Result<void> Restorer::DirDone(const DirFd& parent, const Entry& e, const std::string& rel) {
  if (queue_.empty()) return SetMeta(parent->get(), e, rel);  // nothing left to write below it
  pending_meta_.push_back({parent, e, rel});
  bool many_dirs = HoldDir(parent);
  return pending_meta_.size() >= kMaxQueued || many_dirs ? Flush() : Result<void>();
}

Result<Restorer::How> Restorer::Stream(Queued& q) {
  // The cheapest way first. A clone from a source (a lower, the live tree,
  // a scanned directory) or from the packs (raw records) shares extents; a
  // kernel copy from a source costs no decompression; else the store
  // writes it.
  int fd = q.file.fd.get();
  if (opt_.reflink && opt_.sources && opt_.sources->CloneTo(q.file.rel, q.entry, fd)) return How::kCloned;
  if (opt_.reflink && !opt_.sources_only) {
    auto c = s_.CloneFileTo(q.entry.file(), fd);
    if (!c) return Wrap(q.file.rel, c.error());
    if (*c) return How::kCloned;
  }
  if (opt_.sources && opt_.sources->CopyTo(q.file.rel, q.entry, fd)) return How::kCopied;
  if (opt_.sources_only) return Fail(ErrorCode::kNotFound, q.file.rel + ": no source holds its content");
  if (Result<void> w = s_.WriteFileTo(q.entry.file(), fd); !w) return Wrap(q.file.rel, w.error());
  return How::kWritten;
}

Result<void> Restorer::FinishTemp(Queued& q, bool* clean) {
  bool warned = false;
  Entry t = q.entry;
  t.name = q.file.tmp;
  AE_TRY(SetMeta(q.file.dirfd, t, q.file.rel, &warned));
  *clean = !warned;
  return {};
}

Result<void> Restorer::WriteEach(std::vector<std::unique_ptr<Queued>>& batch, std::vector<How>& how,
                                 std::vector<uint8_t>& clean) {
  // Every file's whole sequence (create, write, close, metadata, rename,
  // stat) on one thread, the files on every core: the metadata calls are
  // most of a restore's system time, and they run side by side too.
  std::vector<Result<void>> res(batch.size());
  std::atomic<bool> failed{false};
  ParallelFor(batch.size(), [&](size_t i) {
    if (failed.load(std::memory_order_relaxed)) return;
    Queued& q = *batch[i];
    NewFile* f = &q.file;
    std::span<NewFile* const> one(&f, 1);
    Result<void> r = io_.CreateAndWrite(one);
    if (r && q.stream) {
      if (auto h = Stream(q)) how[i] = *h;
      else r = Unexpected<Error>(h.error());
    }
    if (r) r = io_.Close(one);
    bool ok = false;
    if (r) r = FinishTemp(q, &ok);
    if (r) r = io_.RenameAndStat(one);
    clean[i] = r && ok;
    if (!r) {
      res[i] = std::move(r);
      failed = true;
    }
  });
  for (auto& r : res)
    if (!r) return r;
  return {};
}

Result<void> Restorer::WriteBatched(std::vector<std::unique_ptr<Queued>>& batch, std::vector<How>& how,
                                    std::vector<uint8_t>& clean) {
  // Each step for the whole batch, one io_uring submission per step; the
  // streamed contents, each into its own fd, on every core.
  std::vector<NewFile*> files;
  for (auto& q : batch) files.push_back(&q->file);
  AE_TRY(io_.CreateAndWrite(files));
  std::vector<size_t> streamed;
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i]->stream) streamed.push_back(i);
  std::vector<Result<void>> wrote(batch.size());
  ParallelFor(streamed.size(), [&](size_t k) {
    size_t i = streamed[k];
    if (auto h = Stream(*batch[i])) how[i] = *h;
    else wrote[i] = Unexpected<Error>(h.error());
  });
  for (size_t i : streamed) AE_TRY(wrote[i]);
  AE_TRY(io_.Close(files));
  // The metadata calls (chown, xattrs, chmod, utimens) have no io_uring
  // opcodes: they run on every core, as in WriteEach.
  std::vector<Result<void>> finished(batch.size());
  ParallelFor(batch.size(), [&](size_t i) {
    bool ok = false;
    finished[i] = FinishTemp(*batch[i], &ok);
    clean[i] = ok;
  });
  for (auto& r : finished) AE_TRY(r);
  return io_.RenameAndStat(files);
}

}  // namespace agentenv::snap::restore_internal
