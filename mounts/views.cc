// Mounted views of nodes and their records (mounts/views.h).
#include "mounts/views.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "common/durable.h"
#include "common/write_all.h"
#include "common/fields.h"
#include "runner/view.h"
#include "snap/fsops.h"
#include "snap/layout.h"
#include "snap/scratch.h"

namespace agentenv::mounts {
namespace {

struct Stored {
  std::string dir, node, lower;
  int64_t uid = 0, pid = 0, created_ns = 0;
  template <class V> void Fields(V& v) {
    v("dir", dir); v("node", node); v("lower", lower); v("uid", uid); v("pid", pid); v("created_ns", created_ns);
  }
};

// One record per directory: its name is a hash of the directory's path.
std::string RecordId(const std::string& dir) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : dir) h = (h ^ c) * 1099511628211ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Whether `dir` shows `lower`: a bind mount's root is the lower's own inode.
bool Shows(const std::string& dir, const std::string& lower) {
  struct stat a, b;
  return ::stat(dir.c_str(), &a) == 0 && ::stat(lower.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Reads an open record; kCorrupt when it is empty or does not parse (a
// `mount` killed while writing it).
Result<MountRecord> ReadRecord(int fd, const std::string& path, const std::string& id) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::pread(fd, buf, sizeof buf, off_t(text.size()))) != 0;) {
    if (n < 0) return FailErrno(path, errno);
    text.append(buf, size_t(n));
  }
  json j = json::parse(text, nullptr, false);
  auto s = ReadReply<Stored>("mount record", j);
  if (!s) return Fail(ErrorCode::kCorrupt, path + ": " + s.error().message);
  MountRecord r{id, s->dir, s->node, s->lower, s->uid, s->pid, s->created_ns};
  r.mounted = Shows(r.dir, r.lower);
  return r;
}

// The record at `path`, locked (LOCK_EX) while the fd lives; nullopt when
// there is none. With `wait` false, kBusy when another process holds it.
Result<std::optional<std::pair<UniqueFd, MountRecord>>> LockRecord(const std::string& path, const std::string& id,
                                                                    bool wait) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    return FailErrno(path, errno);
  }
  if (::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    if (errno == EWOULDBLOCK) return Fail(ErrorCode::kBusy, path + ": a mount is being made");
    return FailErrno(path, errno);
  }
  if (!snap::StillAt(fd.get(), path)) return std::nullopt;  // removed meanwhile
  auto rec = ReadRecord(fd.get(), path, id);
  MountRecord r;
  if (rec) r = *rec;
  else r.id = id;  // unreadable: never mounted by it (its maker died before the bind)
  return std::optional<std::pair<UniqueFd, MountRecord>>(std::in_place, std::move(fd), std::move(r));
}

Result<void> RemoveRecord(const std::string& mounts, const std::string& id) {
  if (::unlink((mounts + "/" + id).c_str()) != 0 && errno != ENOENT) return FailErrno(mounts + "/" + id, errno);
  return FsyncDir(mounts);
}

}  // namespace

Result<std::vector<MountRecord>> ListMounts(const std::string& root) {
  std::vector<MountRecord> out;
  const std::string mounts = snap::layout::Mounts(root);
  DIR* d = ::opendir(mounts.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    return FailErrno(mounts, errno);
  }
  std::vector<std::string> ids;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ids.push_back(e->d_name);
  ::closedir(d);
  for (const std::string& id : ids) {
    const std::string path = mounts + "/" + id;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;  // removed meanwhile
    auto rec = ReadRecord(fd.get(), path, id);
    if (rec) out.push_back(std::move(*rec));
  }
  std::sort(out.begin(), out.end(), [](const MountRecord& a, const MountRecord& b) { return a.dir < b.dir; });
  return out;
}

Result<uint64_t> ReclaimStaleMounts(const std::string& root) {
  const std::string mounts = snap::layout::Mounts(root);
  DIR* d = ::opendir(mounts.c_str());
  if (!d) {
    if (errno == ENOENT) return uint64_t(0);
    return FailErrno(mounts, errno);
  }
  std::vector<std::string> ids;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ids.push_back(e->d_name);
  ::closedir(d);
  uint64_t removed = 0;
  for (const std::string& id : ids) {
    auto locked = LockRecord(mounts + "/" + id, id, false);
    if (!locked && locked.error().code == ErrorCode::kBusy) continue;  // being made
    if (!locked) return Unexpected<Error>(locked.error());
    if (!*locked || (*locked)->second.mounted) continue;
    AE_TRY(RemoveRecord(mounts, id));
    ++removed;
  }
  return removed;
}

Result<std::set<std::string>> MountedLowers(const std::string& root) {
  AE_ASSIGN(auto all, ListMounts(root));
  std::set<std::string> named;
  for (const auto& m : all) named.insert(m.lower.substr(m.lower.rfind('/') + 1));
  return named;
}

Result<MountRecord> MountView(snap::Repo& repo, const store::ObjectId& node, const std::string& dir) {
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) return FailErrno(dir, errno);
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) return Fail(ErrorCode::kInvalid, dir + ": not a directory");
  const std::string mounts = snap::layout::Mounts(repo.root());
  if (::mkdir(mounts.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(mounts, errno);
  AE_TRY(ReclaimStaleMounts(repo.root()));
  // The lower's flock lease lasts until the record, a lease of its own,
  // is durable: no gc removes the lower in between.
  AE_ASSIGN(snap::LowerLease lease, repo.LeaseLower(node));
  MountRecord rec{RecordId(real), real, node.Hex(), lease.dir(), int64_t(::getuid()), int64_t(::getpid()), snap::NowNs()};
  const std::string path = mounts + "/" + rec.id;
  UniqueFd fd;
  for (;;) {
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno == EEXIST) return Fail(ErrorCode::kExists, std::string(real) + ": a view is mounted there (agentenv umount " + real + ")");
    if (!fd) return FailErrno(path, errno);
    if (::flock(fd.get(), LOCK_EX) != 0) return FailErrno(path, errno);
    // A reclaimer that found the empty file unlocked may have removed it.
    if (snap::StillAt(fd.get(), path)) break;
  }
  Stored s{rec.dir, rec.node, rec.lower, rec.uid, rec.pid, rec.created_ns};
  const std::string text = ToJson(s).dump();
  auto made = [&]() -> Result<void> {
    AE_TRY(WriteAll(fd.get(), text.data(), text.size(), path));
    if (::fsync(fd.get()) != 0) return FailErrno(path, errno);
    AE_TRY(FsyncDir(mounts));
    return runner::MountReadOnly(rec.lower, rec.dir);
  }();
  if (!made) {
    (void)RemoveRecord(mounts, rec.id);
    Error e = made.error();
    if (e.code == ErrorCode::kUnsupported)
      e.message = "mount: " + e.message + "; use `agentenv mount REF DIR -- CMD` to run a command with the view";
    return Unexpected<Error>(std::move(e));
  }
  rec.mounted = true;
  return rec;
}

Result<MountRecord> UnmountView(snap::Repo& repo, const std::string& dir) {
  char real[PATH_MAX];
  std::string where = ::realpath(dir.c_str(), real) ? std::string(real) : dir;
  const std::string mounts = snap::layout::Mounts(repo.root());
  const std::string id = RecordId(where);
  AE_ASSIGN(auto locked, LockRecord(mounts + "/" + id, id, true));
  if (!locked) return Fail(ErrorCode::kNotFound, dir + ": no view of this repository is mounted there (see agentenv mount)");
  MountRecord rec = locked->second;
  if (rec.mounted) {
    auto un = runner::Unmount(where);
    if (!un && un.error().code != ErrorCode::kNotFound) return Unexpected<Error>(un.error());
  }
  AE_TRY(RemoveRecord(mounts, id));
  rec.mounted = false;
  (void)ReclaimStaleMounts(repo.root());
  return rec;
}

Result<runner::ExitStatus> RunInView(snap::Repo& repo, const store::ObjectId& node, const std::string& dir,
                                     const std::vector<std::string>& argv) {
  std::string where = dir;
  bool made = false;
  if (where.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/agentenv-view-XXXXXX";
    if (!::mkdtemp(templ.data())) return FailErrno(templ, errno);
    where = templ;
    made = true;
  }
  struct RemoveMade {
    const std::string& dir;
    bool made;
    ~RemoveMade() { if (made) ::rmdir(dir.c_str()); }
  } remove{where, made};
  char real[PATH_MAX];
  if (!::realpath(where.c_str(), real)) return FailErrno(where, errno);
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) return Fail(ErrorCode::kInvalid, where + ": not a directory");
  AE_ASSIGN(snap::LowerLease lease, repo.LeaseLower(node));
  return runner::RunWithView(lease.dir(), real, argv, {std::string("AGENTENV_VIEW=") + real}, lease.fd());
}

}  // namespace agentenv::mounts
