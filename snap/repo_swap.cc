// Restore by swapping subvolumes (RestoreMode::kSwapIfUnused): on btrfs,
// when the target node keeps a subvolume snapshot (subvols/<id>) and
// nothing uses the live tree, the live subvolume is replaced by a writable
// snapshot of it instead of being rewritten file by file: O(1) whatever
// the size of the difference.
//
// Steps, each leaving work/current whole: (1) snapshot subvols/<id> to
// work/.swap-<pid>; (2) check that nothing uses the live tree; (3) carry
// the live tree's ignored paths over (restore keeps them as they are); (4)
// write the `restoring` marker (swap); (5) exchange the two names
// atomically (renameat2 RENAME_EXCHANGE); (6) move HEAD; (7) remove the
// marker; (8) delete the old tree, now at work/.swap-<pid>. A crash before
// (5) leaves the old tree and a leftover the next writer deletes; after
// it, the new tree, HEAD possibly not moved yet, and the marker, whose
// sweep drops HEAD's snapshot: the live tree then descends from another
// snapshot, so the next snapshot walks instead of trusting the change
// search. The saved changes are already a node before (1).
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "common/durable.h"
#include "snap/btrfs.h"
#include "snap/fsops.h"
#include "snap/live_use.h"
#include "snap/repo.h"

namespace agentenv::snap {
namespace {

constexpr std::string_view kSwapPrefix = ".swap-";
// Ignored content is copied into the new tree; beyond this many entries a
// restore in place (which leaves it where it is) is cheaper.
constexpr uint64_t kMaxCarried = 10000;

Result<void> CopyFile(int from_dir, int to_dir, const std::string& name, const struct stat& st,
                      const std::string& rel) {
  UniqueFd src(::openat(from_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!src) return FailErrno(rel, errno);
  UniqueFd dst(::openat(to_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!dst) return FailErrno(rel, errno);
  if (::ioctl(dst.get(), FICLONE, src.get()) == 0) return {};
  loff_t in = 0, out = 0;
  while (in < st.st_size) {
    ssize_t n = ::copy_file_range(src.get(), &in, dst.get(), &out, size_t(st.st_size - in), 0);
    if (n < 0) return FailErrno(rel, errno);
    if (n == 0) break;
  }
  return {};
}

// Copies entry `name` of `from_dir` (and what is below) into `to_dir`,
// metadata included; hardlinks become separate files. *budget counts down
// the entries; kUnsupported when it runs out.
Result<void> CopyEntry(int from_dir, int to_dir, const std::string& name, const std::string& rel,
                       uint64_t* budget) {
  if ((*budget)-- == 0) return Fail(ErrorCode::kUnsupported, rel + ": too much ignored content to carry over");
  struct stat st;
  if (::fstatat(from_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(rel, errno);
  AE_ASSIGN(Meta m, ReadMeta(from_dir, name, st, rel));
  bool chown = ::geteuid() == 0;
  if (S_ISDIR(st.st_mode)) {
    if (::mkdirat(to_dir, name.c_str(), 0700) != 0) return FailErrno(rel, errno);
    AE_ASSIGN(UniqueFd from, OpenDirAt(from_dir, name, rel));
    AE_ASSIGN(UniqueFd to, OpenDirAt(to_dir, name, rel));
    int dup = ::fcntl(from.get(), F_DUPFD_CLOEXEC, 0);
    DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
    if (!d) {
      if (dup >= 0) ::close(dup);
      return FailErrno(rel, errno);
    }
    Result<void> r;
    while (struct dirent* de = ::readdir(d)) {
      std::string n = de->d_name;
      if (n == "." || n == "..") continue;
      r = CopyEntry(from.get(), to.get(), n, Join(rel, n), budget);
      if (!r) break;
    }
    ::closedir(d);
    AE_TRY(r);
  } else if (S_ISREG(st.st_mode)) {
    AE_TRY(CopyFile(from_dir, to_dir, name, st, rel));
  } else if (S_ISLNK(st.st_mode)) {
    std::string target(size_t(st.st_size) + 1, '\0');
    ssize_t n = ::readlinkat(from_dir, name.c_str(), target.data(), target.size());
    if (n < 0) return FailErrno(rel, errno);
    target.resize(size_t(n));
    if (::symlinkat(target.c_str(), to_dir, name.c_str()) != 0) return FailErrno(rel, errno);
  } else if (::mknodat(to_dir, name.c_str(), st.st_mode, st.st_rdev) != 0) {
    return FailErrno(rel, errno);
  }
  return ApplyMeta(to_dir, name, m, S_ISLNK(st.st_mode), chown, rel);
}

// Makes ignored path `rel` of tree `to` what it is in tree `from`.
Result<void> CarryOver(const std::string& from, const std::string& to, const std::string& rel, uint64_t* budget) {
  std::string parent = rel.substr(0, rel.rfind('/') == std::string::npos ? 0 : rel.rfind('/'));
  std::string name = rel.substr(parent.empty() ? 0 : parent.size() + 1);
  UniqueFd from_dir(::open((from + "/" + parent).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  UniqueFd to_dir(::open((to + "/" + parent).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  bool in_from = from_dir && ::fstatat(from_dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  bool in_to = to_dir && ::fstatat(to_dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (!in_from && !in_to) return {};
  // The node lacks the directory that holds it: in place, the restore
  // decides what becomes of it.
  if (!to_dir) return Fail(ErrorCode::kUnsupported, "ignored " + rel + ": its directory differs in the node");
  // The parent's mtime stays the node's (removing and copying move it).
  struct stat pst;
  if (::fstat(to_dir.get(), &pst) != 0) return FailErrno(rel, errno);
  AE_TRY(RemoveTree(to + "/" + rel));
  if (in_from) AE_TRY(CopyEntry(from_dir.get(), to_dir.get(), name, rel, budget));
  struct timespec times[2] = {{0, UTIME_OMIT}, pst.st_mtim};
  if (::futimens(to_dir.get(), times) != 0) return FailErrno(rel, errno);
  return {};
}

}  // namespace

Result<bool> Repo::SwapLive(const store::ObjectId& target, RestoreResult* res, std::string* why, Operation op) {
  AE_ASSIGN(bool subvols, UseSubvols());
  std::string src = layout::Subvols(root_) + "/" + target.Hex();
  if (!subvols) return false;  // not btrfs, or no privilege: nothing to explain
  if (!btrfs::IsSubvolume(src)) {
    *why = "node " + target.Hex().substr(0, 12) + " has no subvolume snapshot";
    return false;
  }
  AE_ASSIGN(bool nested, btrfs::HasNestedSubvolumes(work_dir()));
  if (nested) {
    *why = "the live tree holds a nested subvolume";
    return false;
  }
  std::string tmp = layout::WorkParent(root_) + "/" + std::string(kSwapPrefix) + std::to_string(::getpid());
  AE_TRY(btrfs::Snapshot(src, tmp, false));
  // Anything that stops the swap before the exchange: drop the new tree.
  auto give_up = [&](std::string reason) -> Result<bool> {
    *why = std::move(reason);
    (void)btrfs::DeleteSubvolume(tmp);  // else the next writer's sweep does
    return false;
  };
  // Before the carry-over, which must not copy what is mounted below the
  // live tree (/proc), and once: the walk of /proc is most of a swap's
  // cost. A process that starts using the tree during the carry-over
  // (milliseconds) is not seen.
  AE_ASSIGN(std::optional<std::string> user, FindSubvolumeUser(work_dir()));
  if (user) return give_up("the live tree is in use: " + *user);
  uint64_t budget = kMaxCarried;
  for (const std::string& rel : ignored_literal_) {
    if (!ignored_ || !ignored_(rel, true)) continue;
    auto carried = CarryOver(work_dir(), tmp, rel, &budget);
    if (!carried) return give_up(carried.error().message);
  }
  AE_ASSIGN(UniqueFd marker, BeginLiveRestore(target, true));
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, work_dir().c_str(), RENAME_EXCHANGE) != 0) {
    int e = errno;
    EndLiveRestore();
    return give_up(FailErrno(work_dir(), e).error().message);
  }
  AE_TRY(FsyncDir(layout::WorkParent(root_)));
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_TRY(txn->SetRef("HEAD", target));
  if (!op.time_ns) op.time_ns = NowNs();
  AE_TRY(txn->PutOperation(op));
  AE_TRY(txn->Commit());
  EndLiveRestore();
  res->swapped = true;
  // The old tree is history now (saved before the swap): deleting it is
  // only about space.
  if (auto r = btrfs::DeleteSubvolume(tmp); !r)
    res->stats.warnings.push_back(r.error().message + "; the previous live tree stays there until the next command");
  return true;
}

void Repo::SweepSwapLeftovers() {
  std::string dir = layout::WorkParent(root_);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (struct dirent* de = ::readdir(d))
    if (std::string_view(de->d_name).starts_with(kSwapPrefix)) stale.push_back(dir + "/" + de->d_name);
  ::closedir(d);
  // Under the write lock no swap runs: each is left by a killed one.
  for (const std::string& path : stale) (void)btrfs::DeleteSubvolume(path);
}

}  // namespace agentenv::snap
