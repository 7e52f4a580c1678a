// A test-only LD_PRELOAD layer under every file write of the process: store
// packs, LMDB (meta and index), refs, markers, the live tree. It counts the
// calls that change a file or a directory under AGENTENV_FAULT_ROOT and, at
// call number AGENTENV_FAULT_AT, does what AGENTENV_FAULT_MODE says:
//
//   crash   a power cut: undo everything not yet made durable, then SIGKILL.
//   enospc  that call and every later allocating call fail with ENOSPC.
//   eio     that one call fails with EIO.
//
// Without AGENTENV_FAULT_AT it only counts. The count (and, at a fault, the
// call that took it) goes to AGENTENV_FAULT_REPORT.
//
// Durability model (what a strict POSIX filesystem promises, as in leveldb's
// fault-injection environment, but for names too):
//  - file data: a write is durable once fsync/fdatasync ran on the inode
//    (writes through an O_SYNC/O_DSYNC descriptor are durable at once). A cut
//    restores the bytes each unsynced write overwrote, newest first, and cuts
//    the file back to its size at its last sync.
//  - names: a create, mkdir, unlink, rmdir, link, symlink or rename is
//    durable once its directory (both directories for a rename) is fsynced.
//    A cut undoes the others, newest first. unlink and rmdir move the victim
//    into AGENTENV_FAULT_STASH (same filesystem) instead of freeing it, so
//    the undo can put the very same inode back.
//  - sync()/syncfs() make everything durable.
// Metadata-only changes (chmod, utimes, xattrs) are not modelled.
//
// Why LD_PRELOAD and not a layer in the code: LMDB does its own pwrite,
// fdatasync and O_DSYNC meta writes, and those are the writes whose order
// matters most. io_uring submissions bypass libc, so the tests run with
// AGENTENV_URING=off.
//
// Every tracked call runs under one mutex, so the order of calls (and the
// crash point) is well defined even with the store's worker pool writing.

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

// The libc function under ours, looked up on first use (constant-initialized,
// so a call that comes before this library's initializers still works).
template <class F>
struct Next {
  const char* name;
  F fn = nullptr;
  template <class... A>
  auto operator()(A... a) {
    if (!fn) fn = reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
    return fn(a...);
  }
};

#define REAL(name) Next<decltype(&::name)> real_##name{#name}

using InodeKey = std::pair<dev_t, ino_t>;

struct Range {
  off_t off;
  std::string old;
};

// The not-yet-durable writes of one inode.
struct InodeUndo {
  int fd = -1;             // our own dup: writable, keeps the inode alive
  off_t synced_size = 0;   // its size at the last sync (or when first seen)
  std::vector<Range> old;  // overwritten bytes below synced_size, oldest first
};

enum class OpKind { kCreate, kMkdir, kRemoved, kRename, kExchange };

// One not-yet-durable change of names. Directories are held by O_PATH fds so
// that renames of the directories themselves do not lose track of them.
struct NameOp {
  OpKind kind;
  int dir1 = -1;
  std::string name1;
  InodeKey key1{};
  int dir2 = -1;
  std::string name2;
  InodeKey key2{};
  std::string stash;  // kRemoved: where the victim is; kRename: the replaced file, if any
  bool synced1 = false, synced2 = false;
};

struct State {
  std::mutex mu;
  std::string root;  // realpath of AGENTENV_FAULT_ROOT, with a trailing '/'
  std::string stash_dir;
  int stash_fd = -1;
  long fault_at = 0;
  enum { kCrash, kEnospc, kEio } mode = kCrash;
  std::string report;
  long calls = 0;  // GUARDED_BY(mu)
  bool enospc_sticky = false;
  bool ignore_sync = false;  // AGENTENV_FAULT_IGNORE_SYNC: a program that never syncs (the test of the tests)
  long stash_seq = 0;
  std::map<InodeKey, InodeUndo> inodes;  // GUARDED_BY(mu)
  std::vector<NameOp> names;             // GUARDED_BY(mu)
  std::map<InodeKey, int> dir_fds;       // O_PATH fds of directories named by `names`
};

// Set once Init has read the environment. Constant-initialized and read
// before S(): a sanitizer runtime preloaded ahead of us calls mkdir while it
// sets itself up, before any allocation may happen, and that call (like every
// call before Init) must go straight to libc.
std::atomic<bool> active{false};

State& S() {
  static State* s = new State;  // never destroyed: calls may come during exit
  return *s;
}

REAL(open);
REAL(openat);
REAL(write);
REAL(pwrite);
REAL(pwritev);
REAL(writev);
REAL(ftruncate);
REAL(fallocate);
REAL(fsync);
REAL(fdatasync);
REAL(sync);
REAL(syncfs);
REAL(unlinkat);
REAL(renameat);
REAL(renameat2);
REAL(mkdirat);
REAL(linkat);
REAL(symlinkat);
REAL(mknodat);
REAL(copy_file_range);
REAL(mkdtemp);
REAL(mkostemp);

std::string FdPath(int fd) {
  char link[64], buf[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, size_t(n));
}

bool Under(const std::string& path) {
  const std::string& r = S().root;
  return path.size() + 1 >= r.size() && path.compare(0, r.size() - 1, r, 0, r.size() - 1) == 0 &&
         (path.size() == r.size() - 1 || path[r.size() - 1] == '/');
}

// The absolute path of (dirfd, name), not resolving the last component.
std::string AtPath(int dirfd, const char* name) {
  if (name == nullptr) return "";
  if (name[0] == '/') return name;
  std::string base;
  if (dirfd == AT_FDCWD) {
    char cwd[4096];
    if (!::getcwd(cwd, sizeof cwd)) return "";
    base = cwd;
  } else {
    base = FdPath(dirfd);
  }
  if (base.empty()) return "";
  return *name ? base + "/" + name : base;
}

void SplitPath(const std::string& path, std::string* dir, std::string* leaf) {
  size_t slash = path.find_last_of('/');
  *dir = slash == 0 ? "/" : path.substr(0, slash);
  *leaf = path.substr(slash + 1);
}

bool TrackedFd(int fd) { return active.load(std::memory_order_acquire) && Under(FdPath(fd)); }
bool TrackedPath(int dirfd, const char* name) {
  return active.load(std::memory_order_acquire) && Under(AtPath(dirfd, name));
}

void Report(const std::string& extra) {
  State& s = S();
  if (s.report.empty()) return;
  int fd = real_open(s.report.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = "calls=" + std::to_string(s.calls) + "\n" + extra;
  (void)!real_write(fd, text.data(), text.size());
  ::close(fd);
}

// ---- undo -------------------------------------------------------------------

void RemoveTree(int dirfd, const char* name) {
  int fd = real_openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) {
    real_unlinkat(dirfd, name, 0);
    return;
  }
  DIR* d = ::fdopendir(fd);
  std::vector<std::string> kids;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) kids.push_back(e->d_name);
  }
  for (const auto& k : kids) {
    if (real_unlinkat(::dirfd(d), k.c_str(), 0) != 0) RemoveTree(::dirfd(d), k.c_str());
  }
  ::closedir(d);
  real_unlinkat(dirfd, name, AT_REMOVEDIR);
}

void UndoName(const NameOp& op) {
  State& s = S();
  switch (op.kind) {
    case OpKind::kCreate: real_unlinkat(op.dir1, op.name1.c_str(), 0); break;
    case OpKind::kMkdir: RemoveTree(op.dir1, op.name1.c_str()); break;
    case OpKind::kRemoved: real_renameat(s.stash_fd, op.stash.c_str(), op.dir1, op.name1.c_str()); break;
    case OpKind::kRename:
      real_renameat(op.dir2, op.name2.c_str(), op.dir1, op.name1.c_str());
      if (!op.stash.empty()) real_renameat(s.stash_fd, op.stash.c_str(), op.dir2, op.name2.c_str());
      break;
    case OpKind::kExchange:
      real_renameat2(op.dir1, op.name1.c_str(), op.dir2, op.name2.c_str(), RENAME_EXCHANGE);
      break;
  }
}

[[noreturn]] void PowerCut(const std::string& what) {
  State& s = S();
  // `active` stays set: another thread's call must keep going through the
  // model and wait for the mutex held here until SIGKILL ends the process.
  // Cleared, it would bypass the model and reach the disk after the cut
  // (a restore's workers created temp files that the undo had missed).
  for (auto& [key, u] : s.inodes) {
    int fl = ::fcntl(u.fd, F_GETFL);
    if (fl >= 0 && (fl & O_APPEND)) ::fcntl(u.fd, F_SETFL, fl & ~O_APPEND);  // we are about to die
    for (auto it = u.old.rbegin(); it != u.old.rend(); ++it) real_pwrite(u.fd, it->old.data(), it->old.size(), it->off);
    real_ftruncate(u.fd, u.synced_size);
  }
  for (auto it = s.names.rbegin(); it != s.names.rend(); ++it) UndoName(*it);
  Report("fault=" + std::to_string(s.calls) + " " + what + "\n");
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);
}

// ---- bookkeeping --------------------------------------------------------------

// Counts one tracked call. Returns 0 to go on, or an errno to fail it with.
// `allocating`: the call may need new space (an ENOSPC disk refuses it).
int Step(const std::string& what, bool allocating) {
  State& s = S();
  ++s.calls;
  if (s.enospc_sticky && allocating) return ENOSPC;
  if (s.fault_at == 0 || s.calls != s.fault_at) return 0;
  switch (s.mode) {
    case State::kCrash: PowerCut(what);
    case State::kEio: Report("fault=" + std::to_string(s.calls) + " " + what + "\n"); return EIO;
    case State::kEnospc:
      Report("fault=" + std::to_string(s.calls) + " " + what + "\n");
      s.enospc_sticky = true;
      return ENOSPC;
  }
  return 0;
}

InodeKey KeyOf(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return {};
  return {st.st_dev, st.st_ino};
}

int DirFd(const std::string& dir, InodeKey* key) {
  State& s = S();
  int fd = real_open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return -1;
  *key = KeyOf(fd);
  auto [it, fresh] = s.dir_fds.emplace(*key, fd);
  if (!fresh) ::close(fd);
  return it->second;
}

// Called before a write of [off, off+len) to `fd`: remembers what it overwrites.
void BeforeWrite(int fd, off_t off, size_t len) {
  State& s = S();
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0 && (fl & O_DSYNC)) return;  // O_DSYNC and O_SYNC: durable at once
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  InodeKey key{st.st_dev, st.st_ino};
  auto it = s.inodes.find(key);
  if (it == s.inodes.end()) {
    InodeUndo u;
    // A descriptor of our own without O_APPEND (pwrite would append), or a dup.
    u.fd = real_open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_WRONLY | O_CLOEXEC, 0);
    if (u.fd < 0) u.fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 100);
    u.synced_size = st.st_size;
    it = s.inodes.emplace(key, std::move(u)).first;
  }
  InodeUndo& u = it->second;
  if (off < 0) off = (fl & O_APPEND) ? st.st_size : ::lseek(fd, 0, SEEK_CUR);
  if (off >= u.synced_size || len == 0) return;
  size_t n = std::min<size_t>(len, size_t(u.synced_size - off));
  Range r{off, std::string(n, '\0')};
  ssize_t got = ::pread(fd, r.old.data(), n, off);
  if (got < 0) {  // write-only descriptor: read through a fresh one
    int rfd = real_open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDONLY | O_CLOEXEC, 0);
    got = rfd >= 0 ? ::pread(rfd, r.old.data(), n, off) : -1;
    if (rfd >= 0) ::close(rfd);
  }
  if (got < 0) return;
  r.old.resize(size_t(got));
  u.old.push_back(std::move(r));
}

void Synced(int fd) {
  State& s = S();
  struct stat st;
  if (::fstat(fd, &st) != 0) return;
  InodeKey key{st.st_dev, st.st_ino};
  if (S_ISDIR(st.st_mode)) {
    std::vector<NameOp> keep;
    for (auto& op : s.names) {
      if (op.key1 == key) op.synced1 = true;
      if (op.key2 == key) op.synced2 = true;
      bool two = op.kind == OpKind::kRename || op.kind == OpKind::kExchange;
      if (!(op.synced1 && (!two || op.synced2))) keep.push_back(std::move(op));
    }
    s.names = std::move(keep);
    return;
  }
  auto it = s.inodes.find(key);
  if (it == s.inodes.end()) return;
  it->second.old.clear();
  it->second.synced_size = st.st_size;
}

// Records a new name (dirfd, name) after it was made.
void Created(OpKind kind, int dirfd, const char* name) {
  std::string dir, leaf;
  SplitPath(AtPath(dirfd, name), &dir, &leaf);
  NameOp op{kind};
  op.dir1 = DirFd(dir, &op.key1);
  op.name1 = leaf;
  if (op.dir1 >= 0) S().names.push_back(std::move(op));
}

// Moves (dirfd, name) into the stash; the caller has checked its type.
int StashAway(int dirfd, const char* name, std::string* stash) {
  State& s = S();
  *stash = "v" + std::to_string(::getpid()) + "-" + std::to_string(++s.stash_seq);
  return real_renameat(dirfd, name, s.stash_fd, stash->c_str());
}

// unlink/rmdir: the victim goes to the stash, where a cut can take it back.
int Remove(int dirfd, const char* name, bool dir) {
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
  if (S_ISDIR(st.st_mode) != dir) return real_unlinkat(dirfd, name, dir ? AT_REMOVEDIR : 0);  // its errno
  if (dir) {  // only an empty directory may go
    int fd = real_openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    DIR* d = ::fdopendir(fd);
    bool empty = true;
    while (dirent* e = ::readdir(d)) empty = empty && (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, ".."));
    ::closedir(d);
    if (!empty) {
      errno = ENOTEMPTY;
      return -1;
    }
  }
  std::string dpath, leaf;
  SplitPath(AtPath(dirfd, name), &dpath, &leaf);
  NameOp op{OpKind::kRemoved};
  op.dir1 = DirFd(dpath, &op.key1);
  op.name1 = leaf;
  if (StashAway(dirfd, name, &op.stash) != 0) return -1;
  S().names.push_back(std::move(op));
  return 0;
}

int Rename(int d1, const char* n1, int d2, const char* n2, unsigned flags) {
  std::string p1, l1, p2, l2;
  SplitPath(AtPath(d1, n1), &p1, &l1);
  SplitPath(AtPath(d2, n2), &p2, &l2);
  NameOp op{(flags & RENAME_EXCHANGE) ? OpKind::kExchange : OpKind::kRename};
  op.dir1 = DirFd(p1, &op.key1);
  op.dir2 = DirFd(p2, &op.key2);
  op.name1 = l1;
  op.name2 = l2;
  struct stat src, dst;
  if (::fstatat(d1, n1, &src, AT_SYMLINK_NOFOLLOW) != 0) return -1;
  bool victim = ::fstatat(d2, n2, &dst, AT_SYMLINK_NOFOLLOW) == 0;
  bool replaced_dir = false;
  if (victim && op.kind == OpKind::kRename) {
    if (flags & RENAME_NOREPLACE) {
      errno = EEXIST;
      return -1;
    }
    if (src.st_dev == dst.st_dev && src.st_ino == dst.st_ino) return 0;  // rename(2): a no-op
    if (S_ISDIR(src.st_mode) != S_ISDIR(dst.st_mode)) return real_renameat2(d1, n1, d2, n2, flags);  // its errno
    if (S_ISDIR(dst.st_mode)) {
      if (Remove(d2, n2, true) != 0) return -1;  // an empty directory it replaces
      replaced_dir = true;
    } else if (StashAway(d2, n2, &op.stash) != 0) {
      return -1;
    }
  }
  int r = real_renameat2(d1, n1, d2, n2, flags);
  if (r != 0) {
    int err = errno;
    if (!op.stash.empty()) real_renameat(S().stash_fd, op.stash.c_str(), d2, n2);
    if (replaced_dir) UndoName(S().names.back()), S().names.pop_back();
    errno = err;
    return r;
  }
  S().names.push_back(std::move(op));
  return 0;
}

int Fail(int err) {
  errno = err;
  return -1;
}

struct Guard {
  std::lock_guard<std::mutex> lock{S().mu};
};

__attribute__((constructor)) void Init() {
  State& s = S();
  const char* root = std::getenv("AGENTENV_FAULT_ROOT");
  const char* stash = std::getenv("AGENTENV_FAULT_STASH");
  if (!root || !stash) return;
  char buf[4096];
  if (!::realpath(root, buf)) return;
  s.root = std::string(buf) + "/";
  if (!::realpath(stash, buf)) return;
  s.stash_dir = buf;
  s.stash_fd = real_open(s.stash_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
  if (const char* at = std::getenv("AGENTENV_FAULT_AT")) s.fault_at = std::atol(at);
  if (const char* m = std::getenv("AGENTENV_FAULT_MODE")) {
    if (!std::strcmp(m, "enospc")) s.mode = State::kEnospc;
    if (!std::strcmp(m, "eio")) s.mode = State::kEio;
  }
  if (const char* r = std::getenv("AGENTENV_FAULT_REPORT")) s.report = r;
  s.ignore_sync = std::getenv("AGENTENV_FAULT_IGNORE_SYNC") != nullptr;
  ::unsetenv("LD_PRELOAD");  // children of the process are not ours to count
  rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  active.store(s.stash_fd >= 0, std::memory_order_release);
}

__attribute__((destructor)) void Fini() {
  if (!active.load(std::memory_order_acquire)) return;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.fault_at == 0 || s.calls < s.fault_at) Report("");
}

int OpenTracked(int dirfd, const char* path, int flags, mode_t mode) {
  Guard g;
  bool creates = false, truncates = false;
  struct stat st;
  bool exists = ::fstatat(dirfd, path, &st, 0) == 0;
  if ((flags & O_CREAT) && !exists) creates = true;
  if ((flags & O_TRUNC) && exists && S_ISREG(st.st_mode) && st.st_size > 0 && (flags & O_ACCMODE) != O_RDONLY)
    truncates = true;
  if ((flags & O_TMPFILE) == O_TMPFILE) creates = false;
  if (!creates && !truncates) return real_openat(dirfd, path, flags, mode);
  if (int err = Step(std::string(creates ? "create " : "truncate ") + AtPath(dirfd, path), creates)) return Fail(err);
  if (truncates) {  // the old content is not durably gone until a sync
    int fd = real_openat(dirfd, path, (flags & ~(O_TRUNC | O_CREAT | O_EXCL)) | O_CLOEXEC, mode);
    if (fd < 0) return -1;
    BeforeWrite(fd, 0, size_t(st.st_size));
    ::close(fd);
  }
  int fd = real_openat(dirfd, path, flags, mode);
  if (fd >= 0 && creates) Created(OpKind::kCreate, dirfd, path);
  return fd;
}

template <class F>
ssize_t WriteTracked(int fd, off_t off, size_t len, const char* what, F&& call) {
  if (!TrackedFd(fd)) return call();
  Guard g;
  if (int err = Step(std::string(what) + " " + FdPath(fd), true)) return Fail(err);
  BeforeWrite(fd, off, len);
  return call();
}

template <class F>
int SyncTracked(int fd, const char* what, F& call) {
  if (!TrackedFd(fd)) return call(fd);
  Guard g;
  if (int err = Step(std::string(what) + " " + FdPath(fd), false)) return Fail(err);
  if (S().ignore_sync) return 0;
  // The layer keeps its own account of what is durable: the real sync
  // would only cost time.
  Synced(fd);
  return 0;
}

int RemoveTracked(int dirfd, const char* name, bool dir, const char* what) {
  if (!TrackedPath(dirfd, name)) return dir ? real_unlinkat(dirfd, name, AT_REMOVEDIR) : real_unlinkat(dirfd, name, 0);
  Guard g;
  if (int err = Step(std::string(what) + " " + AtPath(dirfd, name), false)) return Fail(err);
  return Remove(dirfd, name, dir);
}

int RenameTracked(int d1, const char* n1, int d2, const char* n2, unsigned flags) {
  if (!TrackedPath(d1, n1) && !TrackedPath(d2, n2)) return real_renameat2(d1, n1, d2, n2, flags);
  Guard g;
  if (int err = Step("rename " + AtPath(d1, n1) + " -> " + AtPath(d2, n2), false)) return Fail(err);
  return Rename(d1, n1, d2, n2, flags);
}

template <class F>
int MakeTracked(int dirfd, const char* name, OpKind kind, const char* what, F&& call) {
  if (!TrackedPath(dirfd, name)) return call();
  Guard g;
  if (int err = Step(std::string(what) + " " + AtPath(dirfd, name), true)) return Fail(err);
  int r = call();
  if (r == 0) Created(kind, dirfd, name);
  return r;
}

mode_t ModeArg(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode_t(va_arg(ap, int)) : 0;
}

// Every open variant ends here: tracked paths go through the model.
int Route(int dirfd, const char* path, int flags, mode_t mode) {
  if (!TrackedPath(dirfd, path)) return real_openat(dirfd, path, flags, mode);
  return OpenTracked(dirfd, path, flags, mode);
}

}  // namespace


extern "C" {

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return Route(AT_FDCWD, path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return Route(AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return Route(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return Route(dirfd, path, flags, mode);
}
int creat(const char* path, mode_t mode) { return open(path, O_WRONLY | O_CREAT | O_TRUNC, mode); }
int __open_2(const char* path, int flags) { return open(path, flags); }
int __openat_2(int dirfd, const char* path, int flags) { return openat(dirfd, path, flags); }

ssize_t write(int fd, const void* buf, size_t n) {
  return WriteTracked(fd, -1, n, "write", [&] { return real_write(fd, buf, n); });
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  return WriteTracked(fd, off, n, "pwrite", [&] { return real_pwrite(fd, buf, n, off); });
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) { return pwrite(fd, buf, n, off); }
ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  size_t n = 0;
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
  return WriteTracked(fd, -1, n, "writev", [&] { return real_writev(fd, iov, cnt); });
}
ssize_t pwritev(int fd, const struct iovec* iov, int cnt, off_t off) {
  size_t n = 0;
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
  return WriteTracked(fd, off, n, "pwritev", [&] { return real_pwritev(fd, iov, cnt, off); });
}
ssize_t pwritev64(int fd, const struct iovec* iov, int cnt, off_t off) { return pwritev(fd, iov, cnt, off); }
int ftruncate(int fd, off_t len) {
  if (!TrackedFd(fd)) return real_ftruncate(fd, len);
  Guard g;
  if (int err = Step("ftruncate " + FdPath(fd), true)) return Fail(err);
  struct stat st;
  if (::fstat(fd, &st) == 0 && len < st.st_size) BeforeWrite(fd, len, size_t(st.st_size - len));
  else BeforeWrite(fd, st.st_size, 0);
  return real_ftruncate(fd, len);
}
int ftruncate64(int fd, off_t len) { return ftruncate(fd, len); }
int fallocate(int fd, int mode, off_t off, off_t len) {
  return int(WriteTracked(fd, off, 0, "fallocate", [&] { return ssize_t(real_fallocate(fd, mode, off, len)); }));
}
int fallocate64(int fd, int mode, off_t off, off_t len) { return fallocate(fd, mode, off, len); }
ssize_t copy_file_range(int in, off_t* in_off, int out, off_t* out_off, size_t len, unsigned flags) {
  return WriteTracked(out, out_off ? *out_off : -1, len, "copy_file_range",
                      [&] { return real_copy_file_range(in, in_off, out, out_off, len, flags); });
}

int fsync(int fd) { return SyncTracked(fd, "fsync", real_fsync); }
int fdatasync(int fd) { return SyncTracked(fd, "fdatasync", real_fdatasync); }
void sync() {
  real_sync();
  if (!active.load(std::memory_order_acquire)) return;
  Guard g;
  S().inodes.clear();
  S().names.clear();
}
int syncfs(int fd) {
  int r = real_syncfs(fd);
  if (!active.load(std::memory_order_acquire)) return r;
  Guard g;
  if (r == 0) S().inodes.clear(), S().names.clear();
  return r;
}

int unlink(const char* path) { return RemoveTracked(AT_FDCWD, path, false, "unlink"); }
int rmdir(const char* path) { return RemoveTracked(AT_FDCWD, path, true, "rmdir"); }
int unlinkat(int dirfd, const char* path, int flags) {
  return RemoveTracked(dirfd, path, flags & AT_REMOVEDIR, "unlinkat");
}
int remove(const char* path) {
  struct stat st;
  if (::lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) return rmdir(path);
  return unlink(path);
}
int rename(const char* a, const char* b) { return RenameTracked(AT_FDCWD, a, AT_FDCWD, b, 0); }
int renameat(int d1, const char* a, int d2, const char* b) { return RenameTracked(d1, a, d2, b, 0); }
int renameat2(int d1, const char* a, int d2, const char* b, unsigned flags) {
  return RenameTracked(d1, a, d2, b, flags);
}

int mkdir(const char* path, mode_t mode) {
  return MakeTracked(AT_FDCWD, path, OpKind::kMkdir, "mkdir", [&] { return real_mkdirat(AT_FDCWD, path, mode); });
}
int mkdirat(int dirfd, const char* path, mode_t mode) {
  return MakeTracked(dirfd, path, OpKind::kMkdir, "mkdir", [&] { return real_mkdirat(dirfd, path, mode); });
}
int link(const char* a, const char* b) {
  return MakeTracked(AT_FDCWD, b, OpKind::kCreate, "link", [&] { return real_linkat(AT_FDCWD, a, AT_FDCWD, b, 0); });
}
int linkat(int d1, const char* a, int d2, const char* b, int flags) {
  return MakeTracked(d2, b, OpKind::kCreate, "link", [&] { return real_linkat(d1, a, d2, b, flags); });
}
int symlink(const char* target, const char* path) {
  return MakeTracked(AT_FDCWD, path, OpKind::kCreate, "symlink",
                     [&] { return real_symlinkat(target, AT_FDCWD, path); });
}
int symlinkat(const char* target, int dirfd, const char* path) {
  return MakeTracked(dirfd, path, OpKind::kCreate, "symlink", [&] { return real_symlinkat(target, dirfd, path); });
}
int mknodat(int dirfd, const char* path, mode_t mode, dev_t dev) {
  return MakeTracked(dirfd, path, OpKind::kCreate, "mknod", [&] { return real_mknodat(dirfd, path, mode, dev); });
}

// glibc's mk*temp make their file or directory without going through open
// or mkdir: count and record them here.
char* mkdtemp(char* tmpl) {
  std::string dir, leaf;
  SplitPath(AtPath(AT_FDCWD, tmpl), &dir, &leaf);
  if (!TrackedPath(AT_FDCWD, dir.c_str())) return real_mkdtemp(tmpl);
  Guard g;
  if (int err = Step(std::string("mkdtemp ") + tmpl, true)) {
    errno = err;
    return nullptr;
  }
  char* r = real_mkdtemp(tmpl);
  if (r) Created(OpKind::kMkdir, AT_FDCWD, r);
  return r;
}
int mkostemp(char* tmpl, int flags) {
  std::string dir, leaf;
  SplitPath(AtPath(AT_FDCWD, tmpl), &dir, &leaf);
  if (!TrackedPath(AT_FDCWD, dir.c_str())) return real_mkostemp(tmpl, flags);
  Guard g;
  if (int err = Step(std::string("mkostemp ") + tmpl, true)) return Fail(err);
  int fd = real_mkostemp(tmpl, flags);
  if (fd >= 0) Created(OpKind::kCreate, AT_FDCWD, tmpl);
  return fd;
}
int mkstemp(char* tmpl) { return mkostemp(tmpl, 0); }

}  // extern "C"
