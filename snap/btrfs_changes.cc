// What changed between two snapshots of one subvolume: the find-new
// search over inode items, less the inodes only read since (compared with
// the base's items), then a name-and-inode comparison of the changed
// directories' listings.
#include <dirent.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "common/unique_fd.h"
#include "snap/btrfs.h"
#include "snap/fsops.h"
#include "snap/scan.h"

namespace agentenv::snap::btrfs {
namespace {

// An inode item as it compares across snapshots: its access time and
// transid zeroed, the two fields a read moves.
using ComparableItem = std::array<uint8_t, sizeof(btrfs_inode_item)>;

ComparableItem Comparable(const uint8_t* item) {
  ComparableItem c;
  std::memcpy(c.data(), item, c.size());
  std::memset(c.data() + offsetof(btrfs_inode_item, transid), 0, sizeof(btrfs_inode_item::transid));
  std::memset(c.data() + offsetof(btrfs_inode_item, atime), 0, sizeof(btrfs_timespec));
  return c;
}

struct ChangedInode {
  uint64_t ino;
  bool is_dir;
};

// A changed inode that may only have been read since the base (its ctime
// predates it), with its item, which the base's must then equal.
struct MaybeRead {
  ChangedInode inode;
  ComparableItem item;
};

uint64_t Le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return le64toh(v);
}

uint32_t Le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return le32toh(v);
}

int64_t CtimeNs(const uint8_t* item) {
  const uint8_t* t = item + offsetof(btrfs_inode_item, ctime);
  int64_t sec = int64_t(Le64(t + offsetof(btrfs_timespec, sec)));
  return sec * 1'000'000'000 + Le32(t + offsetof(btrfs_timespec, nsec));
}

// One buffer for the searches of a ChangedPaths call.
class SearchBuffer {
 public:
  static constexpr size_t kBuf = 256 * 1024;
  SearchBuffer() : mem_(new uint64_t[(sizeof(btrfs_ioctl_search_args_v2) + kBuf) / 8 + 1]) {}
  btrfs_ioctl_search_args_v2* args() { return reinterpret_cast<btrfs_ioctl_search_args_v2*>(mem_.get()); }

 private:
  std::unique_ptr<uint64_t[]> mem_;
};

// Runs the tree search `key` over the subvolume at `fd` to its end,
// handing each item (header, payload) to `each`, which may stop it with
// an error. The key range is one interval of (objectid, type, offset):
// items of other types between its ends come too.
template <typename Each>
Result<void> Search(int fd, const btrfs_ioctl_search_key& key, SearchBuffer& buf, const std::string& what,
                    Each&& each) {
  btrfs_ioctl_search_args_v2* args = buf.args();
  std::memset(args, 0, sizeof(*args));
  btrfs_ioctl_search_key& k = args->key;
  k = key;
  for (;;) {
    k.nr_items = ~0U;
    args->buf_size = SearchBuffer::kBuf;
    if (::ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args) != 0) {
      int e = errno;
      if (e == EPERM || e == EACCES)
        return Fail(ErrorCode::kUnsupported, what + ": the btrfs change search needs CAP_SYS_ADMIN");
      return FailErrno(what, e);
    }
    if (k.nr_items == 0) return {};
    const uint8_t* p = reinterpret_cast<const uint8_t*>(args->buf);
    btrfs_ioctl_search_header last{};
    for (uint32_t i = 0; i < k.nr_items; ++i) {
      btrfs_ioctl_search_header h;
      std::memcpy(&h, p, sizeof h);
      AE_TRY(each(h, p + sizeof h));
      last = h;
      p += sizeof h + h.len;
    }
    // Continue after the last key returned.
    k.min_objectid = last.objectid;
    k.min_type = last.type;
    k.min_offset = last.offset;
    if (k.min_offset < ~0ULL) {
      ++k.min_offset;
    } else if (k.min_type < 255) {
      ++k.min_type;
      k.min_offset = 0;
    } else {
      if (k.min_objectid >= k.max_objectid) return {};
      ++k.min_objectid;
      k.min_type = 0;
      k.min_offset = 0;
    }
  }
}

// The inode items of objectids [first, last] (min_transid 0: all of them).
btrfs_ioctl_search_key InodeItems(uint64_t first, uint64_t last) {
  btrfs_ioctl_search_key k{};
  k.tree_id = 0;  // the subvolume the fd is in
  k.min_objectid = first;
  k.max_objectid = last;
  k.min_type = BTRFS_INODE_ITEM_KEY;
  k.max_type = BTRFS_INODE_ITEM_KEY;
  k.min_offset = 0;
  k.max_offset = ~0ULL;
  k.max_transid = ~0ULL;
  return k;
}

// Settles `maybe` (ascending inode numbers, emptied) against the base
// snapshot at `base_fd`: returns how many were only read since it, and
// appends the others to *changed. A read under relatime (a file's first
// after it was written, or its first in a day; a directory listed)
// rewrites the inode item with a new access time and transid, nothing
// else. So an inode was only read if its ctime is older than the base
// (ChangedInodes) and its item equals the base's but for those two
// fields. The ctime bound rules out a change after the base within the
// same clock tick as the last one the base holds, which leaves ctime as
// it was; ctime equal to the nanosecond rules out a change after a clock
// step back. What both let through (a change made with the clock stepped
// back into the very tick of the inode's last change, its size as it
// was) is the stat cache's own blind spot: the cached stat matches too,
// and a scan reuses the cached content.
// The base's items are looked up by runs of nearby inode numbers: one
// search per run, whose cost is the items of the inodes in between (a
// few each), where an ioctl costs about as much as a few dozen items.
Result<uint64_t> Settle(int base_fd, std::vector<MaybeRead>& maybe, std::vector<ChangedInode>* changed,
                        SearchBuffer& buf, const std::string& what) {
  constexpr uint64_t kRunGap = 8;
  uint64_t read_only = 0;
  for (size_t first = 0; first < maybe.size();) {
    size_t last = first;
    while (last + 1 < maybe.size() && maybe[last + 1].inode.ino - maybe[last].inode.ino <= kRunGap) ++last;
    size_t next = first;  // the run's first inode the search has not reached
    AE_TRY(Search(base_fd, InodeItems(maybe[first].inode.ino, maybe[last].inode.ino), buf, what,
                  [&](const btrfs_ioctl_search_header& h, const uint8_t* item) -> Result<void> {
                    if (h.type != BTRFS_INODE_ITEM_KEY || h.len < sizeof(btrfs_inode_item)) return {};
                    // Not in the base: new since.
                    while (next <= last && maybe[next].inode.ino < h.objectid)
                      changed->push_back(maybe[next++].inode);
                    if (next <= last && maybe[next].inode.ino == h.objectid) {
                      if (maybe[next].item == Comparable(item)) ++read_only;
                      else changed->push_back(maybe[next].inode);
                      ++next;
                    }
                    return {};
                  }));
    for (; next <= last; ++next) changed->push_back(maybe[next].inode);
    first = last + 1;
  }
  maybe.clear();
  return read_only;
}

// Every inode of the subvolume at `fd` whose inode item was written in a
// transaction after `base.transid`, less those only read since (Settle
// decides against the base snapshot at `base_fd`, a batch at a time, and
// *read_only counts them). The search visits only tree blocks written
// after that transaction too (the kernel skips the others; a block holding
// an item written in a transaction was itself written in it or later), so
// its cost follows the changes, not what the base's own transaction wrote
// (all of init's tree, when no commit came before the snapshot); a
// block's generation says only that something in it changed, so each
// inode item's own transid decides. Why "after" is exact: a
// snapshot is made inside the commit of its transaction, once no writer
// can join it any more, with the delayed inode items flushed; so it holds
// every change stamped with that transaction or earlier, and every later
// change is stamped with a later transaction.
Result<std::vector<ChangedInode>> ChangedInodes(int fd, int base_fd, const Creation& base, uint64_t* read_only,
                                                const std::string& what, const std::string& base_what) {
  constexpr size_t kMaybeBatch = 4096;
  SearchBuffer buf, base_buf;
  btrfs_ioctl_search_key k = InodeItems(BTRFS_FIRST_FREE_OBJECTID, BTRFS_LAST_FREE_OBJECTID);
  k.min_transid = base.transid + 1;
  std::vector<ChangedInode> out;
  std::vector<MaybeRead> maybe;
  maybe.reserve(kMaybeBatch);
  *read_only = 0;
  auto settle = [&]() -> Result<void> {
    AE_ASSIGN(uint64_t n, Settle(base_fd, maybe, &out, base_buf, base_what));
    *read_only += n;
    return {};
  };
  AE_TRY(Search(fd, k, buf, what, [&](const btrfs_ioctl_search_header& h, const uint8_t* item) -> Result<void> {
    if (h.type != BTRFS_INODE_ITEM_KEY || h.len < sizeof(btrfs_inode_item)) return {};
    if (Le64(item + offsetof(btrfs_inode_item, transid)) <= base.transid) return {};
    ChangedInode ci{h.objectid, S_ISDIR(Le32(item + offsetof(btrfs_inode_item, mode)))};
    // Every change but a read moves ctime to the time of the change: one
    // made after the base was made has a ctime after it, less a clock
    // tick (the window, as for the stat cache, holds many).
    if (CtimeNs(item) >= base.time_ns - kRacyWindowNs) {
      out.push_back(ci);
      return {};
    }
    maybe.push_back({ci, Comparable(item)});
    if (maybe.size() == kMaybeBatch) return settle();
    return {};
  }));
  AE_TRY(settle());
  return out;
}

// The tree-relative paths of inode `ino` in the subvolume at `fd` (several
// for a hardlinked file; none for a file unlinked while still open).
Result<std::vector<std::string>> InodePaths(int fd, uint64_t ino, const std::string& what) {
  if (ino == BTRFS_FIRST_FREE_OBJECTID) return std::vector<std::string>{""};
  for (size_t size = 4096;; size *= 4) {
    std::unique_ptr<uint64_t[]> mem(new uint64_t[size / 8]);
    auto* c = reinterpret_cast<btrfs_data_container*>(mem.get());
    btrfs_ioctl_ino_path_args a{};
    a.inum = ino;
    a.size = size;
    a.fspath = reinterpret_cast<uintptr_t>(c);
    if (::ioctl(fd, BTRFS_IOC_INO_PATHS, &a) != 0) {
      if (errno == ENOENT) return std::vector<std::string>{};
      return FailErrno(what + ": inode " + std::to_string(ino), errno);
    }
    if (c->elem_missed > 0 && size < (64u << 20)) continue;
    std::vector<std::string> out;
    const char* base = reinterpret_cast<const char*>(c->val);
    for (uint32_t i = 0; i < c->elem_cnt; ++i) out.emplace_back(base + c->val[i]);
    return out;
  }
}

// Opens directory `rel` below `root_fd` without following any symlink and
// without leaving the tree. Absent (or not a directory): an empty fd.
Result<UniqueFd> OpenBeneath(int root_fd, const std::string& rel, const std::string& what) {
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  std::string p = rel.empty() ? "." : rel;
  int fd = int(::syscall(SYS_openat2, root_fd, p.c_str(), &how, sizeof how));
  if (fd >= 0) return UniqueFd(fd);
  if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV) return UniqueFd();
  return FailErrno(Join(what, rel), errno);
}

struct Listed {
  uint64_t ino;
  unsigned char type;
};

Result<std::map<std::string, Listed>> List(int dir_fd, const std::string& what) {
  std::map<std::string, Listed> out;
  int fd = ::dup(dir_fd);
  if (fd < 0) return FailErrno(what, errno);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return FailErrno(what, errno);
  }
  errno = 0;
  while (struct dirent* de = ::readdir(d)) {
    std::string_view n = de->d_name;
    if (n == "." || n == ".." || IsRestoreTempName(n)) continue;
    out.emplace(std::string(n), Listed{de->d_ino, de->d_type});
  }
  int e = errno;
  ::closedir(d);
  if (e != 0) return FailErrno(what, e);
  return out;
}

}  // namespace

bool CanSearch(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return false;
  btrfs_ioctl_search_args args{};
  args.key.tree_id = 0;
  args.key.min_objectid = args.key.max_objectid = BTRFS_FIRST_FREE_OBJECTID;
  args.key.min_type = args.key.max_type = BTRFS_INODE_ITEM_KEY;
  args.key.max_offset = ~0ULL;
  args.key.max_transid = ~0ULL;
  args.key.nr_items = 1;
  return ::ioctl(fd.get(), BTRFS_IOC_TREE_SEARCH, &args) == 0;
}

Result<Changes> ChangedPaths(const std::string& base, const std::string& next,
                             const std::function<bool(std::string_view rel, bool is_dir)>& skip) {
  AE_ASSIGN(Creation made, Created(base));
  UniqueFd next_fd(::open(next.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!next_fd) return FailErrno(next, errno);
  UniqueFd base_fd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!base_fd) return FailErrno(base, errno);
  Changes ch;
  AE_ASSIGN(std::vector<ChangedInode> inodes,
            ChangedInodes(next_fd.get(), base_fd.get(), made, &ch.read_only, next, base));
  ch.inodes = inodes.size();
  // Below an ignored directory nothing is versioned; the ignored
  // directory itself still is (a placeholder with its own metadata).
  auto hidden = [&](const std::string& rel) {
    if (!skip) return false;
    for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1))
      if (skip(std::string_view(rel).substr(0, slash), true)) return true;
    return false;
  };
  std::set<std::string> paths, entries;
  for (const ChangedInode& ci : inodes) {
    AE_ASSIGN(std::vector<std::string> rels, InodePaths(next_fd.get(), ci.ino, next));
    for (const std::string& rel : rels) {
      if (hidden(rel)) continue;
      if (!ci.is_dir) {
        paths.insert(rel);
        continue;
      }
      if (skip && !rel.empty() && skip(rel, true)) {
        entries.insert(rel);
        continue;
      }
      AE_ASSIGN(UniqueFd was, OpenBeneath(base_fd.get(), rel, base));
      struct stat st;
      if (!was || ::fstat(was.get(), &st) != 0 || st.st_ino != ci.ino) {
        paths.insert(rel);  // a directory new here (made or moved): all of it
        continue;
      }
      AE_ASSIGN(UniqueFd now, OpenBeneath(next_fd.get(), rel, next));
      if (!now) return FailErrno(Join(next, rel), ENOENT);
      AE_ASSIGN(auto before, List(was.get(), Join(base, rel)));
      AE_ASSIGN(auto after, List(now.get(), Join(next, rel)));
      entries.insert(rel);
      // Gone, new, or another inode under the same name (a rename over it).
      for (const auto& [name, l] : before) {
        auto it = after.find(name);
        if (it == after.end() || it->second.ino != l.ino) paths.insert(Join(rel, name));
      }
      for (const auto& [name, l] : after)
        if (!before.count(name)) paths.insert(Join(rel, name));
    }
  }
  ch.paths.assign(paths.begin(), paths.end());
  ch.entries.assign(entries.begin(), entries.end());
  return ch;
}

}  // namespace agentenv::snap::btrfs
