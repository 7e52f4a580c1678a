// EarlyWriter (snap/restore.h): writes the directories of a fresh target
// as a scan completes them, on a thread of its own, so that writing a new
// live tree overlaps the scan that makes its trees instead of following
// it (init --from: the scan is CPU-bound hashing and compressing, the
// writing mostly waits on the filesystem).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <optional>
#include <system_error>
#include <thread>

#include "common/mutex.h"
#include "snap/fsops.h"
#include "snap/restore.h"
#include "snap/restorer.h"

namespace agentenv::snap {

using restore_internal::Restorer;

struct EarlyWriter::Impl {
  Impl(const store::Store& s, int root_fd, const RestoreOptions& o) : opt(o) {
    opt.progress = nullptr;
    opt.sources_only = true;
    opt.written = &written;
    root = std::make_shared<const UniqueFd>(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
    restorer.emplace(s, opt);
    if (!*root) {
      error = FailErrno(".", errno);
      failed = true;
      return;
    }
    try {
      thread = std::thread([this] { Run(); });
    } catch (const std::system_error&) {  // no thread: the final restore writes it all
      failed = true;
    }
  }

  // One directory as the scan handed it over.
  struct Dir {
    std::string rel;
    Entry entry;
    Tree tree;
  };
  // Entries queued at most (~150 bytes each): a scan far ahead of the
  // writing leaves the rest to the final restore.
  static constexpr size_t kMaxQueuedEntries = 16384;

  void Run();
  // Writes `d` if every subdirectory in it was written whole.
  Result<void> Write(const Dir& d);
  // The directory at `rel` ("" the root), made (0700, as the final
  // restore expects of WrittenDirs::made) with the missing ones above it.
  Result<Restorer::DirFd> OpenMade(const std::string& rel);

  RestoreOptions opt;
  // The thread's alone until joined.
  WrittenDirs written;
  std::optional<Restorer> restorer;
  Restorer::DirFd root;
  std::pair<std::string, Restorer::DirFd> last_made;  // OpenMade's last answer
  Result<void> error;

  Mutex mu;
  CondVar cv;
  std::deque<Dir> queue GUARDED_BY(mu);
  size_t queued_entries GUARDED_BY(mu) = 0;
  bool stopping GUARDED_BY(mu) = false;
  bool failed GUARDED_BY(mu) = false;  // Add drops everything
  std::thread thread;
};

void EarlyWriter::Impl::Run() {
  for (;;) {
    std::deque<Dir> batch;
    {
      MutexLock lock(mu);
      while (queue.empty() && !stopping) cv.wait(lock);
      if (queue.empty()) break;
      batch.swap(queue);
      queued_entries = 0;
    }
    // Children come before their parent: a parent finds its
    // subdirectories in written.whole.
    for (const Dir& d : batch)
      if (error) error = Write(d);
    // Nothing more to do for now: what is queued goes out.
    if (error) error = restorer->Flush();
    if (!error) {
      MutexLock lock(mu);
      failed = true;
      queue.clear();
      break;
    }
  }
}

Result<void> EarlyWriter::Impl::Write(const Dir& d) {
  // Its files would not come from the source (nor from the store, not
  // readable yet): the final restore writes it.
  if (!opt.sources || !opt.sources->MayServe(d.rel)) return {};
  for (const Entry& e : d.tree) {
    if (e.kind != Kind::kDir || e.id == EmptyTreeId()) continue;
    auto whole = written.whole.find(Join(d.rel, e.name));
    if (whole == written.whole.end() || whole->second != e.id) return {};  // left to the final restore
  }
  size_t slash = d.rel.rfind('/');
  AE_ASSIGN(Restorer::DirFd parent, OpenMade(slash == std::string::npos ? "" : d.rel.substr(0, slash)));
  if (written.made.erase(d.rel) == 0 && ::mkdirat(parent->get(), d.entry.name.c_str(), 0700) != 0)
    return FailErrno(d.rel, errno);
  AE_ASSIGN(UniqueFd fd, OpenDirAt(parent->get(), d.entry.name, d.rel));
  AE_TRY(restorer->WriteDir(parent, std::make_shared<const UniqueFd>(std::move(fd)), d.rel, d.entry, d.tree));
  written.whole.emplace(d.rel, d.entry.id);
  return {};
}

Result<Restorer::DirFd> EarlyWriter::Impl::OpenMade(const std::string& rel) {
  if (rel.empty()) return root;
  if (last_made.second && last_made.first == rel) return last_made.second;
  Restorer::DirFd cur = root;
  std::string path;
  for (const std::string& name : SplitPath(rel)) {
    path = Join(path, name);
    if (written.made.insert(path).second && ::mkdirat(cur->get(), name.c_str(), 0700) != 0) {
      written.made.erase(path);
      return FailErrno(path, errno);
    }
    AE_ASSIGN(UniqueFd next, OpenDirAt(cur->get(), name, path));
    cur = std::make_shared<const UniqueFd>(std::move(next));
  }
  last_made = {rel, cur};
  return cur;
}

EarlyWriter::EarlyWriter(const store::Store& s, int root_fd, const RestoreOptions& opt)
    : impl_(std::make_unique<Impl>(s, root_fd, opt)) {}

EarlyWriter::~EarlyWriter() {
  {
    MutexLock lock(impl_->mu);
    impl_->stopping = true;
    impl_->queue.clear();  // not finished: what it would write is removed anyway
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void EarlyWriter::Add(const std::string& rel, const Entry& entry, Tree tree) {
  MutexLock lock(impl_->mu);
  if (impl_->failed || impl_->stopping || impl_->queued_entries + tree.size() > Impl::kMaxQueuedEntries) return;
  impl_->queued_entries += tree.size();
  impl_->queue.push_back({rel, entry, std::move(tree)});
  impl_->cv.notify_one();
}

Result<WrittenDirs> EarlyWriter::Finish(RestoreStats* stats) {
  Impl& m = *impl_;
  {
    MutexLock lock(m.mu);
    m.stopping = true;
  }
  m.cv.notify_all();
  if (m.thread.joinable()) m.thread.join();
  AE_TRY(m.restorer->FinishSink());
  if (!m.error || !m.root || !*m.root) {
    // Nothing half-written is left for the final restore to trip on: it
    // writes everything, as it would have without us.
    *stats = RestoreStats();
    if (m.root && *m.root) AE_TRY(m.restorer->RemoveContents(m.root->get(), ""));
    return WrittenDirs();
  }
  *stats = std::move(m.restorer->stats);
  WrittenDirs out = std::move(m.written);
  out.unowned = m.restorer->unowned();
  out.first_unowned = m.restorer->first_unowned();
  return out;
}

}  // namespace agentenv::snap
