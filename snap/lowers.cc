// The lifecycle of lowers (snap/lowers.h): lease, build, sweep, check.
#include "snap/lowers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/durable.h"
#include "snap/clone_sources.h"
#include "snap/diff.h"
#include "snap/fsops.h"
#include "snap/repo.h"
#include "snap/scratch.h"

namespace agentenv::snap {
namespace {

enum class Found { kLeased, kMissing, kUnmarked };

// gc holds a lower's LOCK_EX only while it reads the workspaces' leases
// and renames the lower away; a lease waits that out, at most this long.
constexpr auto kLeaseWait = std::chrono::seconds(30);

// Leases the lower at `dir` (tree `hex`) if it is ready.
Result<Found> TryLease(const std::string& dir, const std::string& hex, LowerLease* out) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return Found::kMissing;
    return FailErrno(dir, errno);
  }
  const auto deadline = std::chrono::steady_clock::now() + kLeaseWait;
  while (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return FailErrno(dir, errno);
    if (!StillAt(fd.get(), dir)) return Found::kMissing;  // renamed away: being removed
    if (std::chrono::steady_clock::now() > deadline)
      return Fail(ErrorCode::kBusy, dir + ": locked by another command for 30 s; retry when it ends");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!StillAt(fd.get(), dir)) return Found::kMissing;
  if (!IsMarkedLower(fd.get(), hex)) return Found::kUnmarked;
  *out = LowerLease(dir, std::move(fd), "existing");
  return Found::kLeased;
}

// Sets the completion mark on the lower being built at `fd`. Its top
// directory may deny its owner writing (a read-only root), which setting a
// user xattr needs: opened up for the moment.
Result<void> Mark(int fd, const std::string& dir, const std::string& hex) {
  if (::fsetxattr(fd, kLowerMarkXattr, hex.data(), hex.size(), 0) == 0) return {};
  int e = errno;
  struct stat st;
  if (e != EACCES || ::fstat(fd, &st) != 0 || ::fchmod(fd, (st.st_mode & 07777) | S_IWUSR) != 0)
    return FailErrno(dir + ": marking the lower complete", e);
  int r = ::fsetxattr(fd, kLowerMarkXattr, hex.data(), hex.size(), 0);
  e = errno;
  ::fchmod(fd, st.st_mode & 07777);
  if (r != 0) return FailErrno(dir + ": marking the lower complete", e);
  return {};
}

}  // namespace

bool IsMarkedLower(int fd, const std::string& tree_hex) {
  char buf[80];
  ssize_t n = ::fgetxattr(fd, kLowerMarkXattr, buf, sizeof buf);
  return n >= 0 && std::string_view(buf, size_t(n)) == tree_hex;
}

Result<LowerLease> Repo::LeaseLower(const store::ObjectId& node) {
  AE_ASSIGN(NodeRecord rec, Record(node));
  if (rec.damaged())
    return Fail(ErrorCode::kCorrupt, "node " + node.Hex().substr(0, 12) + " is damaged and cannot be materialized: " + rec.damage);
  const std::string lowers = layout::Lowers(root_), hex = rec.tree.Hex(), dir = lowers + "/" + hex;
  for (int attempt = 0; attempt < 4; ++attempt) {
    LowerLease lease;
    AE_ASSIGN(Found found, TryLease(dir, hex, &lease));
    if (found == Found::kLeased) {
      // A build killed after its rename but before its scratch went leaves
      // an empty `.tmp-` beside the ready lower: reclaimed here too, since
      // no later command would build (a readdir of a small directory).
      (void)ReclaimLeftovers(lowers, {".tmp-", ".rm-"}, true);
      return lease;
    }
    if (found == Found::kUnmarked) {
      // Not known to be whole (an older version's, or one whose removal was
      // killed before removals renamed first): never trusted, built again.
      auto lock = DirLock::TryExclusive(dir);
      if (!lock && lock.error().code == ErrorCode::kBusy)
        return Fail(ErrorCode::kBusy, dir + ": a lower without its completion mark is in use by another command; retry when it ends");
      if (lock) AE_TRY(Retire(std::move(*lock)));
      continue;
    }
    if (::mkdir(lowers.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(lowers, errno);
    // What killed builds and removals left here goes first.
    (void)ReclaimLeftovers(lowers, {".tmp-", ".rm-"}, true);
    AE_ASSIGN(ScratchDir scratch, ScratchDir::Make(lowers, ".tmp"));
    const std::string built = scratch.path() + "/t";
    std::string method = "snapshot";
    AE_ASSIGN(bool snapshotted, MaterializeSubvol(node, built));
    UniqueFd fd;
    if (!snapshotted) {
      if (::mkdir(built.c_str(), 0700) != 0) return FailErrno(built, errno);
      fd.reset(::open(built.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return FailErrno(built, errno);
      AE_ASSIGN(method, MaterializeStore(node, fd.get(), built));
    } else {
      fd.reset(::open(built.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return FailErrno(built, errno);
    }
    // Leased before it has its ready name, so no gc can take it between
    // the rename and the lease.
    if (::flock(fd.get(), LOCK_SH) != 0) return FailErrno(built, errno);
    AE_TRY(Mark(fd.get(), built, hex));
    // A lower is trusted by its mark and name alone, so both reach the disk
    // only after its contents: one syncfs, then the rename, then the
    // directory's fsync.
    if (::syncfs(fd.get()) != 0) return FailErrno(built + ": syncfs", errno);
    if (::renameat2(AT_FDCWD, built.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST || errno == ENOTEMPTY) continue;  // another process built it: lease theirs
      return FailErrno(dir, errno);
    }
    AE_TRY(FsyncDir(lowers));
    return LowerLease(dir, std::move(fd), method);
  }
  return Fail(ErrorCode::kBusy, dir + ": built and removed by other commands 4 times over; retry");
}

Result<std::string> Repo::MaterializeStore(const store::ObjectId& node, int fd, const std::string& dir) {
  AE_ASSIGN(NodeRecord rec, Record(node));
  AE_ASSIGN(Node n, LoadNode(*store_, node));
  AE_ASSIGN(RestoreOptions ro, RestoreOpts());
  ro.ignored = {};  // a new directory: nothing of it is kept
  // Its files are not the live tree's: their stat cache entries are
  // dropped as they come (kept, they would grow with the tree).
  ro.stat_sink = [](std::vector<std::pair<std::string, StatEntry>>&&) -> Result<void> { return {}; };
  // Files another lower has with the same content and metadata are
  // hardlinked (both are read-only); others are cloned or copied.
  AE_ASSIGN(uint64_t stat_dev, LiveStatDev());
  ro.sources = CloneSources::Open(*store_, layout::Lowers(root_), rec.tree, work_dir(), meta_.get(), stat_dev);
  ro.link_sources = true;
  ro.fresh = true;  // our own new directory: the caller removes it if this fails
  auto restored = RestoreTree(*store_, fd, EmptyTreeId(), n.tree, n.root, n.links, ro);
  if (!restored) return Wrap(dir, restored.error());
  const RestoreStats& rs = *restored;
  std::string method = ro.reflink ? "reflink" : "copy";
  if (rs.files_copied) method += " (" + std::to_string(rs.files_copied) + " from the live tree)";
  if (rs.files_linked)
    method = "hardlink (" + std::to_string(rs.files_linked) + " files), " + method + " (" +
             std::to_string(rs.files_written) + ")";
  return method;
}

Result<Repo::LowerSweep> Repo::SweepLowers(const std::function<Result<std::set<std::string>>()>& persistent) {
  LowerSweep out;
  const std::string lowers = layout::Lowers(root_);
  out.leftovers = ReclaimLeftovers(lowers, {".tmp-", ".rm-"}, true);
  // Every lower no process leases, locked before the workspaces' leases
  // are read: a fork either holds its lease (we skip the lower) or has to
  // wait for our lock, and then finds the lower gone and builds it again.
  std::vector<DirLock> unused;
  if (DIR* d = ::opendir(lowers.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (!store::ObjectId::FromHex(e->d_name)) continue;
      auto lock = DirLock::TryExclusive(lowers + "/" + e->d_name);
      if (lock) unused.push_back(std::move(*lock));
    }
    ::closedir(d);
  }
  if (unused.empty()) return out;
  AE_ASSIGN(std::set<std::string> named, persistent());
  // Every doomed lower leaves its name first and the others are unlocked,
  // then the deleting starts: a fork waiting for one of them (a lease
  // waits out our lock) is not held up while others are deleted.
  std::vector<DirLock> doomed;
  for (DirLock& lock : unused) {
    if (named.count(lock.path().substr(lowers.size() + 1))) continue;
    AE_ASSIGN(DirLock aside, RenameAside(std::move(lock)));
    doomed.push_back(std::move(aside));
  }
  unused.clear();
  for (DirLock& lock : doomed) {
    AE_TRY(Retire(std::move(lock)));
    ++out.removed;
  }
  return out;
}

Result<std::vector<Repo::LowerCheck>> Repo::CheckLowers() {
  std::vector<LowerCheck> out;
  const std::string lowers = layout::Lowers(root_);
  std::vector<std::string> names;
  if (DIR* d = ::opendir(lowers.c_str())) {
    while (dirent* e = ::readdir(d))
      if (store::ObjectId::FromHex(e->d_name)) names.push_back(e->d_name);
    ::closedir(d);
  } else if (errno != ENOENT) {
    return FailErrno(lowers, errno);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& hex : names) {
    LowerCheck c;
    c.dir = lowers + "/" + hex;
    LowerLease lease;
    auto found = TryLease(c.dir, hex, &lease);
    if (!found || *found != Found::kLeased) {
      if (!found) c.problem = found.error().message;
      else if (*found == Found::kUnmarked) c.problem = "no completion mark: not used, built again by the next fork";
      else continue;  // removed meanwhile
      out.push_back(std::move(c));
      continue;
    }
    // Scanned read-only, as fsck's look at the live tree: the ids a batch
    // would give, nothing written.
    auto id = store::ObjectId::FromHex(hex);
    std::unique_ptr<store::Batch> hashing = store_->HashingBatch();
    ScanContext ctx{*store_, *hashing, *meta_, ignored_, NowNs()};
    ctx.ignored_dir = ignored_dir_;
    ctx.live = false;
    UniqueFd fd(::open(c.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return FailErrno(c.dir, errno);
    AE_ASSIGN(ScanOutput scanned, ScanTree(ctx, fd.get()));
    if (scanned.tree == *id) {
      c.ok = true;
    } else {
      scanned.trees.emplace(EmptyTreeId(), EncodeTree({}));
      TreeLoader load = [&](const store::ObjectId& t) -> Result<Tree> {
        auto it = scanned.trees.find(t);
        if (it == scanned.trees.end()) return LoadTree(*store_, t);
        return DecodeTree(it->second, t.Hex());
      };
      AE_ASSIGN(TreeDelta delta, Delta(load, *id, scanned.tree));
      const auto summary = delta.changes.summary();
      c.problem = std::to_string(summary.total()) + " paths differ from its tree:";
      size_t shown = 0;
      for (const Change& ch : summary.sample) {
        if (shown++ == 5) break;
        c.problem += std::string(" ") + ch.op + " " + ch.path;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace agentenv::snap
