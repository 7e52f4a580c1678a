#include "snap/restore.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "snap/bulk_io.h"
#include "snap/fsops.h"
#include "store/worker_pool.h"

namespace agentenv::snap {
namespace {

// A batch is written when this many files or bytes are queued.
constexpr size_t kMaxQueued = 256;
constexpr uint64_t kMaxQueuedBytes = 32 << 20;

class Restorer {
 public:
  Restorer(const store::Store& s, const RestoreOptions& opt) : s_(s), opt_(opt), start_ns_(NowNs()) {}

  // Makes directory `fd` (now matching `from`, or empty) match `to`.
  Result<void> Apply(int fd, const std::string& rel, const std::optional<store::ObjectId>& from,
                     const store::ObjectId& to);
  Result<void> Link(int root_fd, const store::ObjectId& to_tree, const Meta& to_root,
                    const std::pair<std::string, std::string>& link);

  // Sets the root directory's metadata.
  Result<void> SetRootMeta(int root_fd, const Meta& m);
  // Adds the warning about owners that could not be restored, if any.
  void ReportOwners();
  // The first error of opt_.stat_sink, if any.
  const Result<void>& sink_error() const { return sink_error_; }

  RestoreStats stats;

 private:
  // A directory fd shared by the files queued in it, and by the metadata
  // of its subdirectories waiting for the next Flush.
  using DirFd = std::shared_ptr<const UniqueFd>;
  // Makes directory `dir` match `to` like Apply, but leaves its files
  // queued and its subdirectories' metadata pending: files from many small
  // directories then go to the workers in one Flush.
  Result<void> ApplyDir(const DirFd& dir, const std::string& rel, const std::optional<store::ObjectId>& from,
                        const store::ObjectId& to);
  // Sets the metadata of directory entry `e` of `parent` once the files
  // queued so far are written (creating them moves its mtime).
  Result<void> DirDone(const DirFd& parent, const Entry& e, const std::string& rel);
  Result<void> Create(const DirFd& dir, const Entry& e, const std::string& rel);
  // Queues regular file `e` to be written into `fd` (kept open until the
  // next Flush, which the end of every Apply does).
  Result<void> WriteFile(const DirFd& dir, const Entry& e, const std::string& rel);
  // Writes every queued file (create temp names, content, metadata,
  // rename), then sets the pending directories' metadata.
  Result<void> Flush();
  struct Queued;
  enum class How : uint8_t { kWritten, kCloned, kCopied };
  // Flush's two ways: each file start to end on a worker (plain
  // syscalls), or each step for the whole batch (io_uring). *how: where
  // each content came from; *clean: no warning (its stat can be cached).
  Result<void> WriteEach(std::vector<std::unique_ptr<Queued>>& batch, std::vector<How>& how,
                         std::vector<uint8_t>& clean);
  Result<void> WriteBatched(std::vector<std::unique_ptr<Queued>>& batch, std::vector<How>& how,
                            std::vector<uint8_t>& clean);
  // Writes a streamed file's content into its open temp file. Thread-safe.
  Result<How> Stream(Queued& q);
  // Sets the metadata of q's temp file. Thread-safe.
  Result<void> FinishTemp(Queued& q, bool* clean);
  Result<void> Remove(int fd, const std::string& name, bool is_dir, const std::string& rel);
  Result<void> RemoveContents(int fd, const std::string& rel);
  // Thread-safe (stats and the owner tally under meta_mu_); *warned is set
  // when it added a warning.
  Result<void> SetMeta(int fd, const Entry& e, const std::string& rel, bool* warned = nullptr);
  // Records a stat cache entry for regular file `e`, now in place as
  // `e.name` in `fd` with all of its metadata applied.
  void SeedStat(int fd, const Entry& e, const std::string& rel);
  void SeedStat(const Entry& e, const std::string& rel, const struct stat& st);
  // Unprivileged: chowns `e` where allowed (a group we are in). False when
  // `e` keeps another owner and can record the tree's in kOwnerXattr;
  // other kinds that keep another owner are counted (LoseOwner).
  bool TryOwner(int fd, const Entry& e, const std::string& rel);
  void LoseOwner(const Entry& e, const std::string& rel);
  // An ignored path of the live tree: never removed or replaced.
  bool Kept(const Entry& e, const std::string& rel) const {
    return opt_.ignored && opt_.ignored(rel, e.kind == Kind::kDir);
  }
  // Opens subdirectory `name` and makes sure we may change its entries.
  Result<UniqueFd> EnterDir(int fd, const std::string& name, const std::string& rel);
  // Calls fn(k) for every k in [0, n), on the pool's threads and this
  // one; returns when all calls have returned. fn must be thread-safe.
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

  const store::Store& s_;
  const RestoreOptions& opt_;
  struct Queued {
    DirFd dir;  // keeps file.dirfd open
    NewFile file;
    Entry entry;
    bool stream = false;  // content written by the store, not from `file.data`
  };
  std::vector<std::unique_ptr<Queued>> queue_;
  struct PendingMeta {
    DirFd parent;
    Entry entry;
    std::string rel;
  };
  std::vector<PendingMeta> pending_meta_;  // in the order directories were finished: children first
  uint64_t queued_bytes_ = 0;
  // Stat cache entries handed to opt_.stat_sink at a time.
  static constexpr size_t kStatBatch = 16384;
  Result<void> sink_error_;
  BulkIo io_;
  std::atomic<uint64_t> tmp_counter_{0};
  int64_t start_ns_;
  // stats.meta_updated, stats.warnings, unowned_, first_unowned_ while
  // SetMeta runs on several threads (Flush).
  std::mutex meta_mu_;
  uint64_t unowned_ = 0;           // GUARDED_BY(meta_mu_) during Flush
  std::string first_unowned_;      // GUARDED_BY(meta_mu_) during Flush
  std::unique_ptr<store::WorkerPool> pool_;  // made by the first ParallelFor that needs it
};

void Restorer::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < n;) fn(k);
  };
  unsigned helpers = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()) - 1, n > 0 ? n - 1 : 0);
  if (helpers == 0) return work();
  if (!pool_) pool_ = std::make_unique<store::WorkerPool>(std::max(1u, std::thread::hardware_concurrency()) - 1);
  std::mutex mu;
  std::condition_variable cv;
  unsigned running = helpers;
  for (unsigned t = 0; t < helpers; ++t)
    pool_->Submit([&] {
      work();
      std::lock_guard lock(mu);
      if (--running == 0) cv.notify_all();
    });
  work();
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return running == 0; });
}

Result<UniqueFd> Restorer::EnterDir(int fd, const std::string& name, const std::string& rel) {
  auto opened = OpenDirAt(fd, name, rel);
  // Unprivileged, our own 0000 directory cannot even be opened: grant the
  // owner access first (never following a symlink).
  if (!opened && opened.error().errno_value == EACCES && !opt_.privileged &&
      ::fchmodat(fd, name.c_str(), 0700, AT_SYMLINK_NOFOLLOW) == 0)
    opened = OpenDirAt(fd, name, rel);
  if (!opened) return Unexpected<Error>(opened.error());
  UniqueFd sub = std::move(*opened);
  struct stat st;
  if (::fstat(sub.get(), &st) != 0) return FailErrno(rel, errno);
  // Unprivileged, a 0500 or 0000 directory refuses new entries; its final
  // mode is set again after its contents.
  if (!opt_.privileged && (st.st_mode & 0700) != 0700 && ::fchmod(sub.get(), st.st_mode | 0700) != 0)
    return FailErrno(rel, errno);
  return sub;
}

bool Restorer::TryOwner(int fd, const Entry& e, const std::string& rel) {
  struct stat st;
  if (::fstatat(fd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return true;  // ApplyMeta reports it
  if (st.st_uid == e.meta.uid && st.st_gid == e.meta.gid) return true;
  if (::fchownat(fd, e.name.c_str(), e.meta.uid, e.meta.gid, AT_SYMLINK_NOFOLLOW) == 0) return true;
  if (e.kind == Kind::kFile || e.kind == Kind::kDir) return false;  // recorded in kOwnerXattr
  LoseOwner(e, rel);
  return true;
}

void Restorer::LoseOwner(const Entry& e, const std::string& rel) {
  std::lock_guard lock(meta_mu_);
  if (unowned_++ == 0)
    first_unowned_ = rel + ": owner " + std::to_string(e.meta.uid) + ":" + std::to_string(e.meta.gid);
}

void Restorer::ReportOwners() {
  if (unowned_ == 0) return;
  // One line, not one per path: a rootfs restored rootless has thousands.
  stats.warnings.push_back(first_unowned_ + " not restored (needs root; only files and directories can carry " +
                           kOwnerXattr + "); " + std::to_string(unowned_) +
                           " path(s) keep the restoring user as owner");
}

Result<void> Restorer::SetRootMeta(int root_fd, const Meta& m) {
  Entry root;
  root.name = ".";
  root.kind = Kind::kDir;
  root.meta = m;
  return SetMeta(root_fd, root, ".");
}

Result<void> Restorer::SetMeta(int fd, const Entry& e, const std::string& rel, bool* warned) {
  {
    std::lock_guard lock(meta_mu_);
    ++stats.meta_updated;
  }
  const bool symlink = e.kind == Kind::kSymlink;
  if (opt_.privileged) return ApplyMeta(fd, e.name, e.meta, symlink, true, rel);
  Result<void> r;
  if (!TryOwner(fd, e, rel)) {
    // Rootless: the owner the tree names goes into kOwnerXattr, so the
    // next scan records it again and exports keep it.
    Meta m = e.meta;
    PutOwnerXattr(&m.xattrs, m.uid, m.gid);
    r = ApplyMeta(fd, e.name, m, symlink, false, rel);
    if (r || (r.error().errno_value != ENOTSUP && r.error().errno_value != EOPNOTSUPP)) return r;
    LoseOwner(e, rel);  // no user xattrs on this filesystem
  }
  r = ApplyMeta(fd, e.name, e.meta, symlink, false, rel);
  if (!r && r.error().errno_value == EPERM) {
    // e.g. security.* xattrs need privilege: report, do not stop.
    std::lock_guard lock(meta_mu_);
    stats.warnings.push_back(r.error().message);
    if (warned) *warned = true;
    return {};
  }
  return r;
}

void Restorer::SeedStat(int fd, const Entry& e, const std::string& rel) {
  struct stat st;
  if (::fstatat(fd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) SeedStat(e, rel, st);
}

void Restorer::SeedStat(const Entry& e, const std::string& rel, const struct stat& st) {
  // A later write sets mtime to its own time; only when the restored mtime
  // lies outside the current clock tick is that guaranteed to differ.
  if (e.meta.mtime_ns >= start_ns_ - kRacyWindowNs || !S_ISREG(st.st_mode)) return;
  StatEntry se{uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size), ToNs(st.st_mtim),
               ToNs(st.st_ctim),    st.st_mode,          st.st_uid,           st.st_gid,
               e.meta.xattrs,       store::FileRef{e.id, e.content, e.size}};
  // The cache holds xattrs as on disk: with the owner SetMeta recorded.
  if (st.st_uid != e.meta.uid || st.st_gid != e.meta.gid) PutOwnerXattr(&se.xattrs, e.meta.uid, e.meta.gid);
  stats.stat_entries.emplace_back(rel, std::move(se));
  if (opt_.stat_sink && stats.stat_entries.size() >= kStatBatch) {
    Result<void> r = opt_.stat_sink(std::move(stats.stat_entries));
    stats.stat_entries.clear();
    if (!r && sink_error_) sink_error_ = r;
  }
}

bool HasZeroBlock(const std::vector<uint8_t>& data) {
  static const uint8_t zero[4096] = {};
  for (size_t off = 0; off + sizeof zero <= data.size(); off += sizeof zero)
    if (std::memcmp(data.data() + off, zero, sizeof zero) == 0) return true;
  return false;
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
  q->file.tmp = RestoreTempName(tmp_counter_++);
  q->file.name = e.name;
  q->file.rel = rel;
  q->entry = e;
  // Single-chunk files are written from memory in the batch; large files
  // stream from the store, reflinked files are cloned, and a file with a
  // zero block goes through WriteFileTo, which leaves a hole there.
  q->stream = opt_.reflink || opt_.sources || e.content != store::ObjectType::kChunk;
  if (!q->stream) {
    AE_ASSIGN(q->file.data, s_.Get(e.id));
    q->stream = HasZeroBlock(q->file.data);
    if (q->stream) q->file.data.clear();
  }
  queued_bytes_ += q->file.data.size();
  queue_.push_back(std::move(q));
  if (queue_.size() >= kMaxQueued || queued_bytes_ >= kMaxQueuedBytes) return Flush();
  return {};
}

Result<void> Restorer::Flush() {
  if (queue_.empty() && pending_meta_.empty()) return {};
  std::vector<std::unique_ptr<Queued>> batch = std::move(queue_);
  queue_.clear();
  queued_bytes_ = 0;
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
  // Each holds a directory open: a tree of many empty directories must
  // not run out of file descriptors.
  return pending_meta_.size() >= kMaxQueued ? Flush() : Result<void>();
}

Result<Restorer::How> Restorer::Stream(Queued& q) {
  // The cheapest way first. A clone from a source (a lower, the live tree,
  // a scanned directory) or from the packs (raw records) shares extents; a
  // kernel copy from a source costs no decompression; else the store
  // writes it.
  int fd = q.file.fd.get();
  if (opt_.reflink && opt_.sources && opt_.sources->CloneTo(q.file.rel, q.entry, fd)) return How::kCloned;
  if (opt_.reflink) {
    auto c = s_.CloneFileTo(q.entry.file(), fd);
    if (!c) return Wrap(q.file.rel, c.error());
    if (*c) return How::kCloned;
  }
  if (opt_.sources && opt_.sources->CopyTo(q.file.rel, q.entry, fd)) return How::kCopied;
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
  for (size_t i = 0; i < batch.size(); ++i) {
    bool ok = false;
    AE_TRY(FinishTemp(*batch[i], &ok));
    clean[i] = ok;
  }
  return io_.RenameAndStat(files);
}

Result<void> Restorer::Create(const DirFd& dir, const Entry& e, const std::string& rel) {
  ++stats.created;
  int fd = dir->get();
  switch (e.kind) {
    case Kind::kFile: return WriteFile(dir, e, rel);
    case Kind::kDir: {
      if (::mkdirat(fd, e.name.c_str(), 0700) != 0) return FailErrno(rel, errno);
      AE_ASSIGN(UniqueFd sub, OpenDirAt(fd, e.name, rel));
      AE_TRY(ApplyDir(std::make_shared<const UniqueFd>(std::move(sub)), rel, std::nullopt, e.id));
      return DirDone(dir, e, rel);
    }
    case Kind::kSymlink:
      if (::symlinkat(e.target.c_str(), fd, e.name.c_str()) != 0) return FailErrno(rel, errno);
      return SetMeta(fd, e, rel);
    case Kind::kHardlink: return {};  // joined by Link() once every file exists
    case Kind::kChar:
    case Kind::kBlock:
    case Kind::kFifo:
    case Kind::kSocket: {
      mode_t type = e.kind == Kind::kChar ? S_IFCHR : e.kind == Kind::kBlock ? S_IFBLK
                  : e.kind == Kind::kFifo ? S_IFIFO : S_IFSOCK;
      if (::mknodat(fd, e.name.c_str(), type | 0600, dev_t(e.rdev)) != 0) {
        if (errno == EPERM && !opt_.privileged) {
          stats.warnings.push_back(rel + ": " + std::string(KindName(e.kind)) +
                                   " device not created (needs privilege)");
          return {};
        }
        return FailErrno(rel, errno);
      }
      return SetMeta(fd, e, rel);
    }
  }
  return {};
}

Result<void> Restorer::RemoveContents(int fd, const std::string& rel) {
  int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return FailErrno(rel, errno);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(dup), ::closedir);
  if (!dir) {
    ::close(dup);
    return FailErrno(rel, errno);
  }
  std::vector<std::pair<std::string, bool>> names;
  while (struct dirent* de = ::readdir(dir.get())) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.emplace_back(n, de->d_type == DT_DIR);
  }
  for (const auto& [n, is_dir] : names) AE_TRY(Remove(fd, n, is_dir, Join(rel, n)));
  return {};
}

Result<void> Restorer::Remove(int fd, const std::string& name, bool is_dir, const std::string& rel) {
  ++stats.removed;
  if (!is_dir) {
    if (::unlinkat(fd, name.c_str(), 0) == 0 || errno == ENOENT) return {};
    if (errno != EISDIR) return FailErrno(rel, errno);
  }
  auto sub = EnterDir(fd, name, rel);
  if (!sub && sub.error().errno_value == ENOTDIR) {  // it changed type under us
    if (::unlinkat(fd, name.c_str(), 0) == 0) return {};
    return FailErrno(rel, errno);
  }
  if (!sub) return Unexpected<Error>(sub.error());
  AE_TRY(RemoveContents(sub->get(), rel));
  if (::unlinkat(fd, name.c_str(), AT_REMOVEDIR) != 0) return FailErrno(rel, errno);
  return {};
}

Result<void> Restorer::Apply(int fd, const std::string& rel, const std::optional<store::ObjectId>& from,
                             const store::ObjectId& to) {
  // A duplicate the queue may keep open past this call's fd.
  UniqueFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!dup) return FailErrno(rel.empty() ? "." : rel, errno);
  AE_TRY(ApplyDir(std::make_shared<const UniqueFd>(std::move(dup)), rel, from, to));
  return Flush();
}

Result<void> Restorer::ApplyDir(const DirFd& dir, const std::string& rel, const std::optional<store::ObjectId>& from,
                                const store::ObjectId& to) {
  int fd = dir->get();
  Tree a;
  if (from) {
    if (*from == to) return {};
    AE_ASSIGN(a, LoadTree(s_, *from));
  }
  AE_ASSIGN(Tree b, LoadTree(s_, to));
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].name < b[j].name)) {
      std::string crel = Join(rel, a[i].name);
      if (!Kept(a[i], crel)) AE_TRY(Remove(fd, a[i].name, a[i].kind == Kind::kDir, crel));
      ++i;
      continue;
    }
    if (i == a.size() || b[j].name < a[i].name) {
      AE_TRY(Create(dir, b[j], Join(rel, b[j].name)));
      ++j;
      continue;
    }
    const Entry &x = a[i++], &y = b[j++];
    if (x == y) continue;
    std::string crel = Join(rel, y.name);
    if (x.kind == Kind::kDir && y.kind == Kind::kDir) {
      if (x.id != y.id) {
        AE_ASSIGN(UniqueFd sub, EnterDir(fd, y.name, crel));
        AE_TRY(ApplyDir(std::make_shared<const UniqueFd>(std::move(sub)), crel, x.id, y.id));
      } else {
        ++stats.meta_only;
      }
      AE_TRY(DirDone(dir, y, crel));
    } else if (x.kind == y.kind && x.kind != Kind::kHardlink &&
               (x.kind != Kind::kFile || (x.id == y.id && x.size == y.size)) &&
               x.target == y.target && x.rdev == y.rdev) {
      size_t warnings = stats.warnings.size();
      ++stats.meta_only;
      AE_TRY(SetMeta(fd, y, crel));  // same content, other metadata
      if (y.kind == Kind::kFile && stats.warnings.size() == warnings) SeedStat(fd, y, crel);
    } else if (x.kind == Kind::kFile && y.kind == Kind::kFile) {
      AE_TRY(WriteFile(dir, y, crel));  // replaced atomically by rename
    } else if (!Kept(x, crel)) {
      AE_TRY(Remove(fd, x.name, x.kind == Kind::kDir, crel));
      AE_TRY(Create(dir, y, crel));
    }
  }
  return {};
}

// Directories whose modes deny their unprivileged owner (e.g. 0000, set
// when their contents were done) get owner rwx while hardlinks are made
// through them; the modes are put back on destruction.
class GrantedDirs {
 public:
  explicit GrantedDirs(bool privileged) : privileged_(privileged) {}
  ~GrantedDirs() {
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) ::fchmod(it->first.get(), it->second);
  }
  GrantedDirs(const GrantedDirs&) = delete;
  GrantedDirs& operator=(const GrantedDirs&) = delete;

  // OpenDirAt, granting access first when unprivileged.
  Result<UniqueFd> Open(int fd, const std::string& name, const std::string& rel) {
    struct stat st;
    if (!privileged_ && ::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
        (st.st_mode & 0700) != 0700 &&
        ::fchmodat(fd, name.c_str(), (st.st_mode & 07777) | 0700, AT_SYMLINK_NOFOLLOW) == 0) {
      AE_ASSIGN(UniqueFd sub, OpenDirAt(fd, name, rel));
      UniqueFd keep(::fcntl(sub.get(), F_DUPFD_CLOEXEC, 0));
      if (!keep) return FailErrno(rel, errno);
      dirs_.emplace_back(std::move(keep), st.st_mode & 07777);
      return sub;
    }
    return OpenDirAt(fd, name, rel);
  }

 private:
  bool privileged_;
  std::vector<std::pair<UniqueFd, mode_t>> dirs_;
};

// Opens the directory holding tree-relative `path`, component by component.
Result<UniqueFd> OpenParent(int root_fd, const std::string& path, std::string* name, GrantedDirs& g) {
  UniqueFd cur(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!cur) return FailErrno(".", errno);
  size_t i = 0;
  for (size_t slash; (slash = path.find('/', i)) != std::string::npos; i = slash + 1) {
    AE_ASSIGN(cur, g.Open(cur.get(), path.substr(i, slash - i), path.substr(0, slash)));
  }
  *name = path.substr(i);
  return cur;
}

// The entry at tree-relative `path` of tree `root`.
Result<Entry> EntryAt(const store::Store& s, store::ObjectId tree, const std::string& path) {
  size_t i = 0;
  for (;;) {
    size_t slash = path.find('/', i);
    std::string name = path.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
    AE_ASSIGN(Tree t, LoadTree(s, tree));
    auto it = std::find_if(t.begin(), t.end(), [&](const Entry& e) { return e.name == name; });
    if (it == t.end()) return Fail(ErrorCode::kNotFound, path + ": not in tree");
    if (slash == std::string::npos) return *it;
    tree = it->id;
    i = slash + 1;
  }
}

Result<void> Restorer::Link(int root_fd, const store::ObjectId& to_tree, const Meta& to_root,
                            const std::pair<std::string, std::string>& link) {
  const auto& [path, first] = link;
  std::string name, first_name;
  std::optional<GrantedDirs> granted(opt_.privileged);
  AE_ASSIGN(UniqueFd dir, OpenParent(root_fd, path, &name, *granted));
  AE_ASSIGN(UniqueFd first_dir, OpenParent(root_fd, first, &first_name, *granted));
  struct stat a, b;
  if (::fstatat(first_dir.get(), first_name.c_str(), &b, AT_SYMLINK_NOFOLLOW) != 0)
    return FailErrno(first, errno);
  bool exists = ::fstatat(dir.get(), name.c_str(), &a, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return {};
  if (exists) AE_TRY(Remove(dir.get(), name, S_ISDIR(a.st_mode), path));
  if (::linkat(first_dir.get(), first_name.c_str(), dir.get(), name.c_str(), 0) != 0)
    return FailErrno(path, errno);
  granted.reset();  // modes back before the parent's metadata is set again
  // The link changed its directory's mtime: put it back.
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return SetRootMeta(root_fd, to_root);
  std::string parent = path.substr(0, slash), pname;
  AE_ASSIGN(Entry pe, EntryAt(s_, to_tree, parent));
  GrantedDirs on_the_way(opt_.privileged);
  AE_ASSIGN(UniqueFd pdir, OpenParent(root_fd, parent, &pname, on_the_way));
  return SetMeta(pdir.get(), pe, parent);
}

}  // namespace

Result<RestoreStats> RestoreTree(const store::Store& s, int root_fd, const store::ObjectId& from,
                                 const store::ObjectId& to, const Meta& to_root,
                                 std::span<const std::pair<std::string, std::string>> to_links,
                                 const RestoreOptions& opt) {
  BeginPhase(opt.progress, "writing");
  Restorer r(s, opt);
  if (!opt.privileged) {
    struct stat st;
    if (::fstat(root_fd, &st) != 0) return FailErrno(".", errno);
    if ((st.st_mode & 0700) != 0700 && ::fchmod(root_fd, st.st_mode | 0700) != 0) return FailErrno(".", errno);
  }
  AE_TRY(r.Apply(root_fd, "", from, to));
  for (const auto& link : to_links) AE_TRY(r.Link(root_fd, to, to_root, link));
  AE_TRY(r.SetRootMeta(root_fd, to_root));
  r.ReportOwners();
  AE_TRY(r.sink_error());
  return std::move(r.stats);
}

}  // namespace agentenv::snap
