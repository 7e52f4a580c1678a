// snap/restorer: the restore's worker (internal to restore*.cc): walks a
// directory from one tree to another, queues the files it writes and
// writes them in batches. restore.cc holds the walk, restore_write.cc the
// file writing.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "snap/bulk_io.h"
#include "snap/fsops.h"
#include "snap/restore.h"
#include "store/worker_pool.h"

namespace agentenv::snap::restore_internal {

// A batch is written when this many files or bytes are queued, or when
// what is queued holds this many directories open (a tree of many small
// directories must stay well within the usual limit of 1,024 fds).
constexpr size_t kMaxQueued = 256;
constexpr uint64_t kMaxQueuedBytes = 32 << 20;
constexpr size_t kMaxQueuedDirs = 48;

class Restorer {
 public:
  // Owners an EarlyWriter could not restore are counted in with ours.
  Restorer(const store::Store& s, const RestoreOptions& opt) : s_(s), opt_(opt), start_ns_(opt.start_ns ? opt.start_ns : NowNs()) {
    if (opt.written) {
      unowned_ = opt.written->unowned;
      first_unowned_ = opt.written->first_unowned;
    }
  }

  // A directory fd shared by the files queued in it, and by the metadata
  // of its subdirectories waiting for the next Flush.
  using DirFd = std::shared_ptr<const UniqueFd>;

  // Makes directory `fd` (now matching `from`, or empty) match `to`.
  Result<void> Apply(int fd, const std::string& rel, const std::optional<store::ObjectId>& from,
                     const store::ObjectId& to);
  Result<void> Link(int root_fd, const store::ObjectId& to_tree, const Meta& to_root,
                    const std::pair<std::string, std::string>& link);

  // Writes the entries of the new, empty directory `dir` (`rel`, entry `e`
  // in `parent`) from `t` and then its metadata, like Create without
  // reading a tree from the store: the files stay queued until a Flush.
  Result<void> WriteDir(const DirFd& parent, const DirFd& dir, const std::string& rel, const Entry& e,
                        const Tree& t);
  // Writes every queued file (create temp names, content, metadata,
  // rename), then sets the pending directories' metadata.
  Result<void> Flush();
  // Removes everything in directory `fd`.
  Result<void> RemoveContents(int fd, const std::string& rel);
  // Rootless: paths that kept the restoring user as owner, and the first.
  uint64_t unowned() const { return unowned_; }
  const std::string& first_unowned() const { return first_unowned_; }

  // Sets the root directory's metadata.
  Result<void> SetRootMeta(int root_fd, const Meta& m);
  // Adds the warning about owners that could not be restored, if any.
  void ReportOwners();
  // The kHardlink entries the walk created: (path, first path). A node's
  // list of pairs is the restore's to-do list, and these are joined too,
  // so a list that lacks a pair its tree has cannot lose a name.
  std::vector<std::pair<std::string, std::string>> TakeWalkedLinks() {
    MutexLock lock(links_mu_);
    return std::move(walked_links_);
  }
  // Waits for the stat cache batch being handed to opt_.stat_sink, if
  // any; then the first error of opt_.stat_sink, if any.
  const Result<void>& FinishSink();

  RestoreStats stats;

 private:
  // Makes directory `dir` match `to` like Apply, but leaves its files
  // queued and its subdirectories' metadata pending: files from many small
  // directories then go to the workers in one Flush.
  Result<void> ApplyDir(const DirFd& dir, const std::string& rel, const std::optional<store::ObjectId>& from,
                        const store::ObjectId& to);
  // The same with both trees read.
  Result<void> ApplyEntries(const DirFd& dir, const std::string& rel, const Tree& a, const Tree& b);
  // Sets the metadata of directory entry `e` of `parent` once the files
  // queued so far are written (creating them moves its mtime).
  Result<void> DirDone(const DirFd& parent, const Entry& e, const std::string& rel);
  Result<void> Create(const DirFd& dir, const Entry& e, const std::string& rel);
  // Queues regular file `e` to be written into `fd` (kept open until the
  // next Flush, which the end of every Apply does).
  Result<void> WriteFile(const DirFd& dir, const Entry& e, const std::string& rel);
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
  // Directories held open by queue_ and pending_meta_: counted each time
  // the directory differs from the one of the item queued before (at
  // least the distinct ones).
  size_t queued_dirs_ = 0;
  const UniqueFd* last_queued_dir_ = nullptr;
  // Counts `dir` for an item about to be queued; true when the queue
  // should be flushed after it.
  bool HoldDir(const DirFd& dir) {
    if (dir.get() != last_queued_dir_) {
      last_queued_dir_ = dir.get();
      ++queued_dirs_;
    }
    return queued_dirs_ >= kMaxQueuedDirs;
  }
  // Stat cache entries handed to opt_.stat_sink at a time: kStatBatch once
  // the sink is idle, up to kStatBatchMax while it is busy. Each batch
  // commits in one meta transaction whose dirty pages (the stat rows, and a
  // count row per new or released content, at random ids) stay in memory
  // until the commit: at 1M files on ext4, batches of 16k held ~45 MB of
  // them in init and ~110 MB in a restore of every file; 4k hold a
  // quarter. Where commits are slow (an fsync among the restore's own
  // writes on btrfs), batches grow instead of the restore waiting.
  static constexpr size_t kStatBatch = 4096, kStatBatchMax = 16384;
  bool SinkBusy() const {
    return sink_pending_.valid() &&
           sink_pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  }
  // Hands stats.stat_entries to opt_.stat_sink on a thread of its own,
  // once the batch before has gone: the sink's commit waits on an fsync,
  // which on a filesystem busy with the restore's own writes took 1-1.5 s
  // on btrfs, and the restore goes on meanwhile. At most two batches are
  // held: the one being handed over and the one filling.
  void HandToSink();
  Result<void> sink_error_;
  std::future<Result<void>> sink_pending_;  // joined by FinishSink or the destructor
  BulkIo io_;
  std::atomic<uint64_t> tmp_counter_{0};
  int64_t start_ns_;
  // stats.meta_updated, stats.warnings, unowned_, first_unowned_ while
  // SetMeta runs on several threads (Flush).
  Mutex meta_mu_;
  Mutex links_mu_;
  std::vector<std::pair<std::string, std::string>> walked_links_ GUARDED_BY(links_mu_);
  uint64_t unowned_ = 0;           // GUARDED_BY(meta_mu_) during Flush
  std::string first_unowned_;      // GUARDED_BY(meta_mu_) during Flush
  std::unique_ptr<store::WorkerPool> pool_;  // made by the first ParallelFor that needs it
};

}  // namespace agentenv::snap::restore_internal
