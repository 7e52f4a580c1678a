// What changed between two snapshots of one subvolume: the find-new
// search over inode items, then a name-and-inode comparison of the
// changed directories' listings.
#include <dirent.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "common/unique_fd.h"
#include "snap/btrfs.h"
#include "snap/fsops.h"

namespace agentenv::snap::btrfs {
namespace {

struct ChangedInode {
  uint64_t ino;
  bool is_dir;
};

uint64_t Le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return le64toh(v);
}

// Every inode of the subvolume at `fd` whose inode item was written in a
// transaction after `since`. The search visits only tree blocks written
// since then (the kernel skips older ones), so its cost follows the
// changes; a block's generation says only that something in it changed,
// so each inode item's own transid decides. Why "after" is exact: a
// snapshot is made inside the commit of its transaction `since`, once no
// writer can join it any more, with the delayed inode items flushed; so
// it holds every change stamped `since` or earlier, and every later
// change is stamped with a later transaction.
Result<std::vector<ChangedInode>> ChangedInodes(int fd, uint64_t since, const std::string& what) {
  constexpr size_t kBuf = 256 * 1024;
  std::unique_ptr<uint64_t[]> mem(new uint64_t[(sizeof(btrfs_ioctl_search_args_v2) + kBuf) / 8 + 1]);
  auto* args = reinterpret_cast<btrfs_ioctl_search_args_v2*>(mem.get());
  std::memset(args, 0, sizeof(*args));
  btrfs_ioctl_search_key& k = args->key;
  k.tree_id = 0;  // the subvolume `fd` is in
  k.min_objectid = BTRFS_FIRST_FREE_OBJECTID;
  k.max_objectid = BTRFS_LAST_FREE_OBJECTID;
  k.min_type = BTRFS_INODE_ITEM_KEY;
  k.max_type = BTRFS_INODE_ITEM_KEY;
  k.min_offset = 0;
  k.max_offset = ~0ULL;
  k.min_transid = since;
  k.max_transid = ~0ULL;
  std::vector<ChangedInode> out;
  for (;;) {
    k.nr_items = ~0U;
    args->buf_size = kBuf;
    if (::ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args) != 0) {
      int e = errno;
      if (e == EPERM || e == EACCES)
        return Fail(ErrorCode::kUnsupported, what + ": the btrfs change search needs CAP_SYS_ADMIN");
      return FailErrno(what, e);
    }
    if (k.nr_items == 0) break;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(args->buf);
    btrfs_ioctl_search_header last{};
    for (uint32_t i = 0; i < k.nr_items; ++i) {
      btrfs_ioctl_search_header h;
      std::memcpy(&h, p, sizeof h);
      const uint8_t* item = p + sizeof h;
      // The key range is one interval of (objectid, type, offset): other
      // item types of the inodes in between come too.
      if (h.type == BTRFS_INODE_ITEM_KEY && h.len >= sizeof(btrfs_inode_item)) {
        uint64_t transid = Le64(item + offsetof(btrfs_inode_item, transid));
        uint32_t mode;
        std::memcpy(&mode, item + offsetof(btrfs_inode_item, mode), 4);
        if (transid > since) out.push_back({h.objectid, S_ISDIR(le32toh(mode))});
      }
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
      if (k.min_objectid == BTRFS_LAST_FREE_OBJECTID) break;
      ++k.min_objectid;
      k.min_type = 0;
      k.min_offset = 0;
    }
    if (k.min_objectid > BTRFS_LAST_FREE_OBJECTID) break;
  }
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
  AE_ASSIGN(uint64_t since, CreatedTransid(base));
  UniqueFd next_fd(::open(next.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!next_fd) return FailErrno(next, errno);
  UniqueFd base_fd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!base_fd) return FailErrno(base, errno);
  AE_ASSIGN(std::vector<ChangedInode> inodes, ChangedInodes(next_fd.get(), since, next));
  Changes ch;
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
