#include "snap/restore.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "snap/fsops.h"
#include "snap/restorer.h"

namespace agentenv::snap::restore_internal {


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
  MutexLock lock(meta_mu_);
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
    MutexLock lock(meta_mu_);
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
    MutexLock lock(meta_mu_);
    stats.warnings.push_back(r.error().message);
    if (warned) *warned = true;
    return {};
  }
  return r;
}

Result<void> Restorer::Create(const DirFd& dir, const Entry& e, const std::string& rel) {
  if (e.kind == Kind::kDir && opt_.written) {  // an EarlyWriter may have been here first
    auto whole = opt_.written->whole.find(rel);
    if (whole != opt_.written->whole.end() && whole->second == e.id) return {};
  }
  ++stats.created;
  int fd = dir->get();
  switch (e.kind) {
    case Kind::kFile: return WriteFile(dir, e, rel);
    case Kind::kDir: {
      if ((!opt_.written || !opt_.written->made.count(rel)) && ::mkdirat(fd, e.name.c_str(), 0700) != 0)
        return FailErrno(rel, errno);
      AE_ASSIGN(UniqueFd sub, OpenDirAt(fd, e.name, rel));
      AE_TRY(ApplyDir(std::make_shared<const UniqueFd>(std::move(sub)), rel, std::nullopt, e.id));
      return DirDone(dir, e, rel);
    }
    case Kind::kSymlink:
      if (::symlinkat(e.target.c_str(), fd, e.name.c_str()) != 0) return FailErrno(rel, errno);
      return SetMeta(fd, e, rel);
    case Kind::kHardlink: {  // joined by Link() once every file exists
      MutexLock lock(links_mu_);
      walked_links_.emplace_back(rel, e.target);
      return {};
    }
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
  // Opened anew, not dup'ed: a btrfs directory fd lists only the entries
  // that existed when it was opened (the kernel caches the last index),
  // and `fd` may be older than what is in it now.
  int dup = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return FailErrno(rel.empty() ? "." : rel, errno);
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
  // A writer in the live tree (the agent, while a tournament's winner or a
  // rollback is applied) may add an entry after the listing: empty it
  // again. One that keeps adding faster than we remove gets the error.
  for (int round = 0;; ++round) {
    AE_TRY(RemoveContents(sub->get(), rel));
    if (::unlinkat(fd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return {};
    if (errno != ENOTEMPTY || round == 8) return FailErrno(rel, errno);
  }
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
  Tree a, b;
  if (from) {
    if (*from == to) return {};
    AE_ASSIGN(a, LoadTree(s_, *from));
  }
  // The empty tree needs no read (a directory an EarlyWriter writes holds
  // empty ones, and the store's batch is not readable yet).
  if (to != EmptyTreeId()) {
    AE_ASSIGN(b, LoadTree(s_, to));
  }
  return ApplyEntries(dir, rel, a, b);
}

Result<void> Restorer::WriteDir(const DirFd& parent, const DirFd& dir, const std::string& rel, const Entry& e,
                                const Tree& t) {
  ++stats.created;
  AE_TRY(ApplyEntries(dir, rel, {}, t));
  return DirDone(parent, e, rel);
}

Result<void> Restorer::ApplyEntries(const DirFd& dir, const std::string& rel, const Tree& a, const Tree& b) {
  int fd = dir->get();
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

namespace {

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

}  // namespace

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

}  // namespace agentenv::snap::restore_internal

namespace agentenv::snap {

using restore_internal::Restorer;

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
  std::vector<std::pair<std::string, std::string>> links = r.TakeWalkedLinks();
  links.insert(links.end(), to_links.begin(), to_links.end());
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  for (const auto& link : links) AE_TRY(r.Link(root_fd, to, to_root, link));
  AE_TRY(r.SetRootMeta(root_fd, to_root));
  r.ReportOwners();
  AE_TRY(r.FinishSink());
  return std::move(r.stats);
}

}  // namespace agentenv::snap
