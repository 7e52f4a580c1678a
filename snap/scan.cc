// The full scan: the parallel walk of a tree (scan.h), its workers' Scanner
// (scanner.h) and the metadata read of one entry.
#include "snap/scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "snap/fsops.h"
#include "snap/scanner.h"

namespace agentenv::snap::scan_internal {

void MakePlaceholder(Entry* e) {
  e->id = EmptyTreeId();
  e->meta.mtime_ns = 0;
}

namespace {

bool IsOverlayXattr(const std::string& name) {
  return name.rfind("user.overlay.", 0) == 0 || name.rfind("trusted.overlay.", 0) == 0;
}

}  // namespace

void StripOverlayXattrs(Xattrs* x) {
  x->erase(std::remove_if(x->begin(), x->end(), [](const auto& kv) { return IsOverlayXattr(kv.first); }), x->end());
}

bool Opaque(const Xattrs& x) {
  for (const auto& [k, v] : x)
    if ((k == "user.overlay.opaque" || k == "trusted.overlay.opaque") && v == "y") return true;
  return false;
}

bool WalkOrder(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    size_t ie = a.find('/', i), je = b.find('/', j);
    if (ie == std::string::npos) ie = a.size();
    if (je == std::string::npos) je = b.size();
    int c = a.compare(i, ie - i, b, j, je - j);
    if (c != 0) return c < 0;
    i = ie + 1;
    j = je + 1;
  }
  return a.size() - std::min(a.size(), i) < b.size() - std::min(b.size(), j);
}

Result<void> ReadDirNames(int fd, const std::string& rel, DirNames* out, bool rewind) {
  if (rewind && ::lseek(fd, 0, SEEK_SET) != 0) return FailErrno(rel.empty() ? "." : rel, errno);
  alignas(8) char buf[32768];
  std::vector<std::pair<size_t, size_t>> at;  // offset and length in out->bytes
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(rel.empty() ? "." : rel, errno);
    if (n == 0) break;
    // Names take less room than their records: one growth per read.
    out->bytes.reserve(out->bytes.size() + size_t(n));
    at.reserve(at.size() + size_t(n) / 24);  // a record is at least 24 bytes
    for (long off = 0; off < n;) {
      auto* de = reinterpret_cast<struct dirent64*>(buf + off);
      std::string_view name = de->d_name;
      if (name != "." && name != ".." && !IsRestoreTempName(name)) {
        at.emplace_back(out->bytes.size(), name.size());
        out->bytes.append(name.data(), name.size() + 1);  // with its NUL
      }
      off += de->d_reclen;
    }
  }
  out->names.reserve(at.size());
  for (const auto& [off, len] : at) out->names.emplace_back(out->bytes.data() + off, len);
  return {};
}

void SortNames(std::vector<std::string_view>* names) {
  // By the first 8 bytes as a big-endian integer (zero-padded: no name
  // holds a NUL, so a shorter name sorts first, as with memcmp), then by
  // the whole name: most comparisons are one integer compare instead of a
  // memcmp call (the sort was 6% of a no-change walk's user time).
  std::vector<std::pair<uint64_t, std::string_view>> keyed;
  keyed.reserve(names->size());
  for (std::string_view n : *names) {
    uint8_t b[8] = {};
    std::memcpy(b, n.data(), std::min<size_t>(n.size(), 8));
    uint64_t k = 0;
    for (uint8_t c : b) k = k << 8 | c;
    keyed.emplace_back(k, n);
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  for (size_t i = 0; i < keyed.size(); ++i) (*names)[i] = keyed[i].second;
}

Result<UniqueFd> OpenScanDir(int fd, const std::string& name, const std::string& rel, uid_t euid) {
  auto sub = OpenDirAt(fd, name, rel);
  struct stat st;
  if (sub || sub.error().errno_value != EACCES ||
      ::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return sub;
  OwnerAccess access(fd, name, st, euid);
  return OpenDirAt(fd, name, rel);
}

Result<void> Scanner::ReadEntry(int dirfd, const std::string& name, const std::string& rel,
                                const struct stat& st, const MetaDb::StatReader& cache, Entry* e,
                                DirCache* dir) {
  OwnerAccess access(dirfd, name, st, euid_);
  e->meta.mode = st.st_mode & 07777;
  e->meta.uid = st.st_uid;
  e->meta.gid = st.st_gid;
  e->meta.mtime_ns = ToNs(st.st_mtim);
  switch (st.st_mode & S_IFMT) {
    case S_IFREG: {
      e->kind = Kind::kFile;
      StatEntry now{FieldsOf(st), {}};
      auto cached = cache.Get(rel);
      if (cached && cached->Matches(now)) {
        e->meta.xattrs = cached->xattrs;  // as on disk: the owner xattr too
        TakeOwnerXattr(&e->meta);
        e->id = cached->ref.id;
        e->content = cached->ref.type;
        e->size = cached->ref.size;
        Advance(ctx_.progress, 1, 0);
        return {};  // an xattr change would have changed ctime
      }
      // O_NONBLOCK: if a fifo was swapped in since the stat, opening it
      // must not hang; the fstat below then sees it is not our file.
      UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
      if (!fd) return FailErrno(rel, errno);
      struct stat opened;
      if (::fstat(fd.get(), &opened) != 0) return FailErrno(rel, errno);
      if (!S_ISREG(opened.st_mode) || opened.st_ino != st.st_ino)
        return Fail(rel + ": replaced while scanning", ENOENT);  // like a vanished path
      AE_ASSIGN(e->meta.xattrs, ReadXattrs(dirfd, name, rel));
      if (ctx_.overlay_upper) StripOverlayXattrs(&e->meta.xattrs);
      Xattrs on_disk = e->meta.xattrs;
      TakeOwnerXattr(&e->meta);
      AE_ASSIGN(store::FileRef ref, ctx_.batch.PutFile(fd.get(), rel));
      e->id = ref.id;
      e->content = ref.type;
      e->size = ref.size;
      MutexLock lock(mu);
      out.hashed_files++;
      out.hashed_bytes += ref.size;
      Advance(ctx_.progress, 1, ref.size);
      if (ctx_.live && now.ctime_ns < ctx_.start_ns - kRacyWindowNs) {
        now.xattrs = std::move(on_disk);
        now.ref = ref;
        out.stat_updates.emplace_back(rel, std::move(now));
      }
      return {};
    }
    case S_IFDIR: e->kind = Kind::kDir; break;
    case S_IFLNK: e->kind = Kind::kSymlink; break;
    case S_IFIFO: e->kind = Kind::kFifo; break;
    case S_IFSOCK: e->kind = Kind::kSocket; break;
    case S_IFCHR: e->kind = Kind::kChar; e->rdev = st.st_rdev; break;
    case S_IFBLK: e->kind = Kind::kBlock; e->rdev = st.st_rdev; break;
    default: return Fail(ErrorCode::kUnsupported, rel + ": unknown file type");
  }
  // The entry cache serves the live tree only: an overlay's upper or a
  // foreign tree has other inodes, and its xattrs are read as they are.
  const bool cacheable = ctx_.live && !ctx_.overlay_upper;
  if (!cacheable || !ctx_.removals || e->kind != Kind::kDir) dir = nullptr;
  EntryStat now{FieldsOf(st), {}};
  if (cacheable) {
    auto cached = cache.GetEntry(rel);
    if (cached && cached->Matches(now)) {
      if (dir) {
        // A hint gone stale (the directory's files changed in place) is
        // left: it costs the next scans one lookup, where rewriting it
        // would cost each a page of the entry cache.
        if (cached->tree && cached->tree_removals == *ctx_.removals) dir->hint = cached->tree;
        else dir->record = *cached;
      }
      // A symlink's target is fixed at creation, and setting an xattr
      // moves ctime: neither can differ from what was read before.
      e->target = std::move(cached->target);
      e->meta.xattrs = std::move(cached->xattrs);
      TakeOwnerXattr(&e->meta);
      return {};
    }
  }
  if (e->kind == Kind::kSymlink) {
    std::string buf(std::max<size_t>(st.st_size, 255) + 1, '\0');
    ssize_t n = ::readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
    if (n < 0) return FailErrno(rel, errno);
    buf.resize(n);
    e->target = std::move(buf);
  }
  AE_ASSIGN(e->meta.xattrs, ReadXattrs(dirfd, name, rel));
  if (ctx_.overlay_upper) StripOverlayXattrs(&e->meta.xattrs);
  read_entries_.fetch_add(1, std::memory_order_relaxed);
  if (cacheable && now.ctime_ns < ctx_.start_ns - kRacyWindowNs) {
    now.xattrs = e->meta.xattrs;  // as on disk: the owner xattr too
    now.target = e->target;
    if (dir) dir->record = std::move(now);
    else RecordEntry(rel, std::move(now));
  }
  TakeOwnerXattr(&e->meta);
  return {};
}

void Scanner::RecordEntry(const std::string& rel, EntryStat e) {
  MutexLock lock(mu);
  // Bounded: a first scan of a tree of a million symlinks records the
  // first kMaxEntryUpdates, the next scans the rest.
  if (out.entry_updates.size() < kMaxEntryUpdates) out.entry_updates.emplace_back(rel, std::move(e));
}

Result<void> Scanner::ListDir(ScanDir& d, int fd, const MetaDb::StatReader& cache,
                              std::vector<WalkTask>* subdirs) {
  DirAccess access(fd, euid_);
  // Few allocations per entry: the names are read into one buffer, each
  // entry's name is its only copy (none for a short name), and one path
  // buffer serves them all (with two workers, freeing another thread's
  // allocations contends on glibc's arena locks).
  DirNames dir;
  std::vector<std::pair<size_t, std::pair<uint64_t, uint64_t>>> linked;  // entry index, dev/ino
  std::vector<std::pair<size_t, DirCache>> dir_caches;  // entry index, in order
  if (Result<void> listed = ReadDirNames(fd, d.rel, &dir, /*rewind=*/!d.parent); !listed) {
    // Removed after we opened it (a dead directory lists as ENOENT): record
    // it empty, like one gone before we got there; its deletion's own
    // events follow.
    if (listed.error().errno_value != ENOENT) return listed;
    dir.names.clear();
    d.cache.record.reset();
  }
  SortNames(&dir.names);
  d.entries.reserve(dir.names.size());
  EntryFilter ignored_here = ctx_.ignored_dir ? ctx_.ignored_dir(d.rel) : EntryFilter();
  std::string rel = d.rel.empty() ? std::string() : d.rel + "/";
  const size_t base = rel.size();
  for (std::string_view name : dir.names) {
    rel.resize(base);
    rel += name;
    struct stat st;
    if (::fstatat(fd, name.data(), &st, AT_SYMLINK_NOFOLLOW) != 0) {  // NUL-terminated
      if (errno == ENOENT) continue;  // deleted while we scan
      return FailErrno(rel, errno);
    }
    bool is_dir = S_ISDIR(st.st_mode);
    bool ignored = ignored_here ? ignored_here(name, is_dir) : ctx_.ignored && ctx_.ignored(rel, is_dir);
    if (ignored && !is_dir) continue;
    // Built in place (reserved above): no move and no destruction of a
    // temporary per entry.
    const size_t i = d.entries.size();
    Entry& e = d.entries.emplace_back();
    e.name = name;
    DirCache dc;
    Result<void> r = ReadEntry(fd, e.name, rel, st, cache, &e, ignored ? nullptr : &dc);
    if (!r && r.error().errno_value == ENOENT) {
      d.entries.pop_back();
      continue;
    }
    AE_TRY(r);
    if (ignored) MakePlaceholder(&e);
    if (dc.hint || dc.record) dir_caches.emplace_back(i, std::move(dc));
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) linked.push_back({i, {uint64_t(st.st_dev), uint64_t(st.st_ino)}});
  }
  auto next_cache = dir_caches.begin();
  for (size_t i = 0; i < d.entries.size(); ++i) {
    Entry& e = d.entries[i];
    if (e.kind == Kind::kDir && e.id != EmptyTreeId()) {  // placeholders have their (empty) tree
      auto sub = std::make_unique<ScanDir>();
      sub->rel = Join(d.rel, e.name);
      if (next_cache != dir_caches.end() && next_cache->first == i) sub->cache = std::move((next_cache++)->second);
      sub->parent = &d;
      sub->index = i;
      WalkTask task;
      task.dir = sub.get();
      if (access.granted()) {  // lookups here work only until we return
        AE_ASSIGN(auto opened, OpenTask(task, fd));
        if (!opened) {
          e.id = EmptyTreeId();
          continue;
        }
        task.fd = std::move(*opened);
      }
      d.pending.fetch_add(1);  // before any worker can see the subdirectory
      subdirs->push_back(std::move(task));
      d.subdirs.emplace_back(i, std::move(sub));
    }
  }
  if (!linked.empty()) {
    d.deferred = true;
    MutexLock lock(mu);
    for (const auto& [i, inode] : linked) links_[inode].push_back({&d, i});
  }
  return {};
}

Result<std::optional<UniqueFd>> Scanner::OpenTask(const WalkTask& task, int parent_fd) {
  const ScanDir& d = *task.dir;
  // The parent's entries stay put until all its subdirectories are done.
  auto sfd = OpenScanDir(parent_fd, d.parent->entries[d.index].name, d.rel, euid_);
  if (!sfd && (sfd.error().errno_value == ENOENT || sfd.error().errno_value == ENOTDIR))
    return std::optional<UniqueFd>();
  if (!sfd) return Unexpected<Error>(sfd.error());
  return std::optional<UniqueFd>(std::move(*sfd));
}

Result<std::unique_ptr<ScanDir>> Scanner::Walk(UniqueFd fd, const std::string& rel) {
  auto root = std::make_unique<ScanDir>();
  root->rel = rel;
  Mutex qmu;  // guards stack, busy and failed
  CondVar cv;
  std::vector<WalkTask> stack;
  stack.push_back({root.get(), std::move(fd), nullptr});
  size_t busy = 0;
  Result<void> failed;
  auto list = [&](WalkTask& task, const MetaDb::StatReader& cache, std::vector<WalkTask>* subdirs) -> Result<void> {
    if (!task.fd) {
      AE_ASSIGN(auto opened, OpenTask(task, task.parent->get()));
      task.parent.reset();
      if (!opened) {  // gone: listed as empty, and its entry not recorded
        task.dir->cache.record.reset();
        return Done(task.dir);
      }
      task.fd = std::move(*opened);
    }
    AE_TRY(ListDir(*task.dir, task.fd.get(), cache, subdirs));
    AE_TRY(Done(task.dir));
    bool share = std::any_of(subdirs->begin(), subdirs->end(), [](const WalkTask& t) { return !t.fd; });
    if (!share) return {};
    auto shared = std::make_shared<const UniqueFd>(std::move(task.fd));
    for (WalkTask& t : *subdirs)
      if (!t.fd) t.parent = shared;
    return {};
  };
  auto worker = [&] {
    // A foreign tree has no stat cache entries: no read transaction.
    auto cache = ctx_.live ? ctx_.meta.ReadStats() : Result<std::unique_ptr<MetaDb::StatReader>>(MetaDb::NoStats());
    for (;;) {
      WalkTask task;
      {
        MutexLock lock(qmu);
        while (stack.empty() && busy != 0 && failed) cv.wait(lock);
        if (!failed || stack.empty()) return;
        task = std::move(stack.back());
        stack.pop_back();
        ++busy;
      }
      std::vector<WalkTask> subdirs;
      Result<void> r = cache ? list(task, **cache, &subdirs) : Result<void>(Unexpected<Error>(cache.error()));
      MutexLock lock(qmu);
      --busy;
      if (!r && failed) failed = r;
      // Deepest first: a parent's fd is closed once its last subdirectory
      // is opened, so the fds open are about the depth.
      for (auto& s : subdirs) stack.push_back(std::move(s));
      cv.notify_all();
    }
  };
  unsigned n = std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  AE_TRY(failed);
  return root;
}

Result<void> Scanner::Done(ScanDir* d) {
  while (d && d->pending.fetch_sub(1) == 1) {
    if (d->deferred) {
      if (d->parent) d->parent->deferred = true;
    } else {
      AE_ASSIGN(d->id, StoreDir(*d));
      // Each subdirectory writes only its own entry of the parent.
      if (d->parent) d->parent->entries[d->index].id = *d->id;
      if (d->parent && ctx_.on_dir) ctx_.on_dir(d->rel, d->parent->entries[d->index], std::move(d->entries));
      // Stored: nothing reads this directory's entries again, so memory
      // follows the walk's frontier, not the tree. (A deferred directory
      // keeps them: FixHardlinks and PutTrees need them, and so do its
      // ancestors, deferred in turn.) The finished subdirectories' small
      // shells stay until the walk ends: freeing them here, often on
      // another thread than the one that made them, contended on glibc's
      // arena locks.
      Tree().swap(d->entries);
    }
    d = d->parent;
  }
  return {};
}

Result<store::ObjectId> Scanner::PutTrees(ScanDir& d) {
  if (d.id) return *d.id;
  for (auto& [i, sub] : d.subdirs) {
    AE_ASSIGN(d.entries[i].id, PutTrees(*sub));
  }
  return StoreDir(d);
}

Result<store::ObjectId> Scanner::StoreDir(ScanDir& d) {
  AE_ASSIGN(store::ObjectId id, PutTree(d.entries, d.cache.hint));
  std::optional<EntryStat>& rec = d.cache.record;
  if (rec) {
    rec->tree = id;
    rec->tree_removals = *ctx_.removals;
    RecordEntry(d.rel, std::move(*rec));
    rec.reset();
  }
  return id;
}

Result<store::ObjectId> Scanner::PutTree(const Tree& t, const std::optional<store::ObjectId>& hint) {
  std::vector<uint8_t> bytes = EncodeTree(t);
  // Hashed twice when the hint is stale: only directories that changed.
  if (hint && store::ObjectId::Of(bytes) == *hint) return *hint;
  looked_up_trees_.fetch_add(1, std::memory_order_relaxed);
  // A tree the store already had is read from the store when needed; only
  // the new ones (not readable until the batch commits) are kept.
  bool stored_before = false;
  AE_ASSIGN(store::ObjectId id, ctx_.batch.Put(store::ObjectType::kTree, bytes, &stored_before));
  if (stored_before) return id;
  MutexLock lock(mu);
  out.trees.emplace(id, std::move(bytes));
  out.new_trees.push_back(id);
  if (out.trees.size() >= prune_at_) {
    // Trees a batch step has committed are readable from the store now.
    std::erase_if(out.trees, [&](const auto& t) {
      Result<bool> has = ctx_.store.Has(t.first);
      return has && *has;  // unsure: keep it
    });
    prune_at_ = out.trees.size() + kPruneEvery;
  }
  return id;
}

std::vector<std::pair<std::string, std::string>> Scanner::FixHardlinks() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [inode, members] : links_) {
    if (members.size() < 2) continue;  // other links are outside the tree
    auto rel = [](const std::pair<ScanDir*, size_t>& m) {
      return Join(m.first->rel, m.first->entries[m.second].name);
    };
    std::sort(members.begin(), members.end(),
              [&](const auto& a, const auto& b) { return WalkOrder(rel(a), rel(b)); });
    std::string first = rel(members[0]);
    for (size_t k = 1; k < members.size(); ++k) {
      Entry& e = members[k].first->entries[members[k].second];
      std::string path = rel(members[k]);
      Entry link;
      link.name = e.name;
      link.kind = Kind::kHardlink;
      link.target = first;
      e = std::move(link);
      out.emplace_back(std::move(path), first);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<Meta> RootMeta(int root_fd) {
  struct stat st;
  if (::fstat(root_fd, &st) != 0) return FailErrno(".", errno);
  return ReadMeta(root_fd, ".", st, ".");
}

}  // namespace agentenv::snap::scan_internal

namespace agentenv::snap {

using namespace scan_internal;

Result<Meta> ReadMeta(int dirfd, const std::string& name, const struct stat& st,
                      const std::string& rel) {
  Meta m;
  m.mode = st.st_mode & 07777;
  m.uid = st.st_uid;
  m.gid = st.st_gid;
  m.mtime_ns = ToNs(st.st_mtim);
  AE_ASSIGN(m.xattrs, ReadXattrs(dirfd, name, rel));
  TakeOwnerXattr(&m);
  return m;
}

Result<ScanOutput> ScanTree(const ScanContext& ctx, int root_fd) {
  Scanner sc(ctx);
  AE_ASSIGN(sc.out.root, RootMeta(root_fd));
  UniqueFd fd(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!fd) return FailErrno(".", errno);
  AE_ASSIGN(auto root, sc.Walk(std::move(fd), ""));
  sc.out.links = sc.FixHardlinks();
  AE_ASSIGN(sc.out.tree, sc.PutTrees(*root));
  sc.out.walked = true;
  return sc.Take();
}

}  // namespace agentenv::snap
