// Helpers for the snap/ tests: capture a live tree field by field (walking
// with fds, so paths longer than PATH_MAX work), diff two captures, build
// trees, run a scenario as an unprivileged user, and a loopback XFS mount.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "settle_testutil.h"
#include "snap/repo.h"
#include "testutil.h"

namespace agentenv::test {

// Everything a restore must reproduce about one path.
struct FsEntry {
  char type = '?';  // f d l p c b s
  uint32_t mode = 0, uid = 0, gid = 0;
  int64_t mtime_ns = 0;
  uint64_t size = 0, blocks = 0, rdev = 0, nlink = 0;
  std::string content;  // files: bytes; symlinks: target
  std::vector<std::pair<std::string, std::string>> xattrs;
  std::string link_group;  // files with nlink > 1: first path of the inode in walk order
};
using Manifest = std::map<std::string, FsEntry>;

inline std::string ProcFdPath(int dirfd, const std::string& name) {
  return "/proc/self/fd/" + std::to_string(dirfd) + "/" + name;
}

inline std::vector<std::pair<std::string, std::string>> ListXattrs(int dirfd, const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string p = ProcFdPath(dirfd, name);
  std::vector<char> names(65536);
  ssize_t n = ::llistxattr(p.c_str(), names.data(), names.size());
  for (ssize_t i = 0; i < n;) {
    std::string key(&names[i]);
    i += key.size() + 1;
    std::vector<char> v(65536);
    ssize_t m = ::lgetxattr(p.c_str(), key.c_str(), v.data(), v.size());
    if (m >= 0) out.emplace_back(key, std::string(v.data(), m));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Reads `name` in `dirfd`; unprivileged, a 0000 file or directory is opened
// by granting the owner access for a moment (chmod leaves mtime alone).
inline int OpenForCapture(int dirfd, const std::string& name, int flags, const struct stat& st) {
  int fd = ::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 || errno != EACCES) return fd;
  ::fchmodat(dirfd, name.c_str(), (st.st_mode & 07777) | 0700, 0);
  fd = ::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  ::fchmodat(dirfd, name.c_str(), st.st_mode & 07777, 0);
  return fd;
}

inline void CaptureAt(int dirfd, const std::string& name, const std::string& rel, Manifest& m,
                      std::map<std::pair<uint64_t, uint64_t>, std::string>& inodes) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    m[rel].type = 'E';
    return;
  }
  FsEntry& e = m[rel];
  e.mode = st.st_mode & 07777;
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  e.xattrs = ListXattrs(dirfd, name);
  switch (st.st_mode & S_IFMT) {
    case S_IFREG: {
      e.type = 'f';
      e.size = st.st_size;
      e.blocks = st.st_blocks;
      e.nlink = st.st_nlink;
      if (st.st_nlink > 1) {
        auto [it, fresh] = inodes.try_emplace({st.st_dev, st.st_ino}, rel);
        e.link_group = it->second;
      }
      int fd = OpenForCapture(dirfd, name, O_RDONLY, st);
      e.content.resize(st.st_size);
      if (fd < 0 || ::pread(fd, e.content.data(), e.content.size(), 0) != ssize_t(e.content.size()))
        e.content = "<unreadable>";
      if (fd >= 0) ::close(fd);
      break;
    }
    case S_IFLNK: {
      e.type = 'l';
      std::string buf(st.st_size + 1, '\0');
      ssize_t n = ::readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
      buf.resize(n < 0 ? 0 : n);
      e.content = buf;
      break;
    }
    case S_IFIFO: e.type = 'p'; break;
    case S_IFSOCK: e.type = 's'; break;
    case S_IFCHR: e.type = 'c'; e.rdev = st.st_rdev; break;
    case S_IFBLK: e.type = 'b'; e.rdev = st.st_rdev; break;
    case S_IFDIR: {
      e.type = 'd';
      int fd = OpenForCapture(dirfd, name, O_RDONLY | O_DIRECTORY, st);
      if (fd < 0) {
        e.content = "<unreadable dir>";
        return;
      }
      DIR* d = ::fdopendir(fd);
      std::vector<std::string> names;
      while (struct dirent* de = ::readdir(d)) {
        std::string n = de->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      std::sort(names.begin(), names.end());
      for (const auto& n : names) CaptureAt(::dirfd(d), n, rel == "." ? n : rel + "/" + n, m, inodes);
      ::closedir(d);
      break;
    }
  }
}

// The whole tree at `dir` ("." is the root itself).
inline Manifest Capture(const std::string& dir) {
  Manifest m;
  std::map<std::pair<uint64_t, uint64_t>, std::string> inodes;
  CaptureAt(AT_FDCWD, dir, ".", m, inodes);
  return m;
}

inline std::string Printable(const std::string& s, size_t max = 60) {
  std::string out;
  for (unsigned char c : s.substr(0, max)) {
    if (c >= 0x20 && c < 0x7f) out += char(c);
    else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return s.size() > max ? out + "...(" + std::to_string(s.size()) + " bytes)" : out;
}

// Differences between two captures, one line each, empty when equal.
// Sparse files must stay sparse: the restored file may not use more than
// 64 KiB more space than the original did.
inline std::vector<std::string> CompareManifests(const Manifest& want, const Manifest& got) {
  std::vector<std::string> out;
  auto diff = [&](const std::string& path, const char* field, auto w, auto g) {
    if (w == g) return;
    std::ostringstream s;
    s << Printable(path) << ": " << field << " want " << w << " got " << g;
    out.push_back(s.str());
  };
  for (const auto& [path, w] : want) {
    auto it = got.find(path);
    if (it == got.end()) {
      out.push_back(Printable(path) + ": missing");
      continue;
    }
    const FsEntry& g = it->second;
    diff(path, "type", w.type, g.type);
    if (w.type != g.type) continue;
    diff(path, "mode", std::to_string(w.mode), std::to_string(g.mode));
    diff(path, "uid", w.uid, g.uid);
    diff(path, "gid", w.gid, g.gid);
    diff(path, "mtime_ns", w.mtime_ns, g.mtime_ns);
    diff(path, "rdev", w.rdev, g.rdev);
    diff(path, "link_group", Printable(w.link_group), Printable(g.link_group));
    diff(path, "nlink", w.nlink, g.nlink);
    if (w.type == 'f') diff(path, "size", w.size, g.size);
    if (w.content != g.content)
      out.push_back(Printable(path) + ": content want '" + Printable(w.content) + "' got '" +
                    Printable(g.content) + "'");
    if (w.xattrs != g.xattrs) {
      std::string a, b;
      for (const auto& [k, v] : w.xattrs) a += k + "=" + Printable(v, 16) + " ";
      for (const auto& [k, v] : g.xattrs) b += k + "=" + Printable(v, 16) + " ";
      out.push_back(Printable(path) + ": xattrs want [" + a + "] got [" + b + "]");
    }
    if (w.type == 'f' && w.blocks * 512 < w.size && g.blocks > w.blocks + 128)
      diff(path, "blocks (sparse)", w.blocks, g.blocks);
  }
  for (const auto& [path, g] : got) {
    if (!want.count(path)) out.push_back(Printable(path) + ": unexpected " + std::string(1, g.type));
  }
  return out;
}

// --- building trees ---

inline bool WriteFileAt(const std::string& path, const std::string& content, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, content.data(), content.size()) == ssize_t(content.size());
  ::close(fd);
  return ok && ::chmod(path.c_str(), mode) == 0;
}

inline std::string ReadFileAt(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "<missing>";
  std::string s;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) s.append(buf, n);
  ::close(fd);
  return s;
}

// Sets mtime to sec.nsec without following a symlink.
inline bool SetMtime(const std::string& path, time_t sec, long nsec) {
  struct timespec ts[2] = {{0, UTIME_OMIT}, {sec, nsec}};
  return ::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0;
}

// A directory chain under `dir` whose total path is longer than PATH_MAX,
// with a file and a symlink at the bottom. Built with mkdirat/openat.
inline bool MakeDeepTree(const std::string& dir, const std::string& leaf_content) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; fd >= 0 && i < 22; ++i) {
    std::string name = std::string(200, 'd') + std::to_string(i);
    ::mkdirat(fd, name.c_str(), 0755);
    int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    ::close(fd);
    fd = sub;
  }
  if (fd < 0) return false;
  int f = ::openat(fd, "leaf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  bool ok = f >= 0 && ::write(f, leaf_content.data(), leaf_content.size()) == ssize_t(leaf_content.size());
  if (f >= 0) ::close(f);
  ::symlinkat("leaf", fd, "leaf-link");
  ::close(fd);
  return ok;
}

// Removes `name` in `dirfd` and everything below it, fd by fd (paths may be
// longer than PATH_MAX), granting itself access to 0000 directories.
inline void RemoveAt(int dirfd, const std::string& name) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0) return;
  ::fchmodat(dirfd, name.c_str(), 0700, 0);
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  std::vector<std::string> names;
  while (struct dirent* de = ::readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  for (const auto& n : names) RemoveAt(::dirfd(d), n);
  ::closedir(d);
  ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
}

// A TempDir whose contents are removed fd by fd first (deep paths).
class DeepTempDir : public TempDir {
 public:
  ~DeepTempDir() {
    int fd = ::open(str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    DIR* d = ::fdopendir(fd);
    std::vector<std::string> names;
    while (struct dirent* de = ::readdir(d)) {
      std::string n = de->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    for (const auto& n : names) RemoveAt(::dirfd(d), n);
    ::closedir(d);
  }
};

// Runs `fn` in a child process as uid/gid 65534 with no supplementary
// groups and returns the problems it reported (or why it died).
inline std::vector<std::string> RunAsNobody(const std::function<std::vector<std::string>()>& fn) {
  int p[2];
  if (::pipe(p) != 0) return {"pipe failed"};
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return {"fork failed"};
  if (pid == 0) {
    ::close(p[0]);
    std::vector<std::string> problems;
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      problems.push_back("cannot drop privileges");
    } else {
      try {
        problems = fn();
      } catch (const std::exception& e) {
        problems.push_back(std::string("exception: ") + e.what());
      }
    }
    std::string all;
    for (const auto& s : problems) all += s + "\n";
    for (size_t off = 0; off < all.size();) {
      ssize_t n = ::write(p[1], all.data() + off, all.size() - off);
      if (n <= 0) break;
      off += n;
    }
    ::_exit(problems.empty() ? 0 : 1);
  }
  ::close(p[1]);
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) all.append(buf, n);
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::vector<std::string> out;
  std::istringstream in(all);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  if (!WIFEXITED(status)) out.push_back("child died with status " + std::to_string(status));
  else if (WEXITSTATUS(status) != 0 && out.empty()) out.push_back("child failed without a message");
  return out;
}

inline std::string RunCmd(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// An XFS filesystem with reflink on a loop device mounted at <dir>/mnt;
// unmounted and detached on destruction (declare it after its TempDir).
class XfsMount {
 public:
  explicit XfsMount(const std::string& dir) : mnt_(dir + "/mnt") {
    std::string img = dir + "/xfs.img";
    ::mkdir(mnt_.c_str(), 0755);
    if (std::system(("truncate -s 512M " + img + " && mkfs.xfs -q -m reflink=1 " + img +
                     " >/dev/null 2>&1").c_str()) != 0)
      return;
    dev_ = RunCmd("losetup --find --show " + img + " 2>/dev/null");
    if (dev_.empty()) return;
    mounted_ = ::mount(dev_.c_str(), mnt_.c_str(), "xfs", 0, nullptr) == 0;
  }
  ~XfsMount() {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
    if (!dev_.empty()) std::system(("losetup -d " + dev_).c_str());
  }
  XfsMount(const XfsMount&) = delete;
  XfsMount& operator=(const XfsMount&) = delete;
  bool ok() const { return mounted_; }
  const std::string& dir() const { return mnt_; }

 private:
  std::string mnt_, dev_;
  bool mounted_ = false;
};

// A new repository at `root`; the test fails if it cannot be created.
inline std::unique_ptr<snap::Repo> MakeRepo(const std::string& root) {
  auto r = snap::Repo::Create(root);
  REQUIRE(r);
  return std::move(*r);
}

// Snapshots the live tree; the test fails unless a node is made.
inline store::ObjectId Snap(snap::Repo& r) {
  auto s = r.Snapshot({});
  REQUIRE(s);
  REQUIRE(s->node);
  return *s->node;
}

// Skips the test where no loopback btrfs can be made.
inline void NeedBtrfs(const BtrfsMount& m) {
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
}

// The tree of `node`, of HEAD, and a full scan's tree of the live tree.
inline store::ObjectId TreeOf(snap::Repo& r, const store::ObjectId& node) {
  auto rec = r.Record(node);
  REQUIRE(rec);
  return rec->tree;
}

inline store::ObjectId HeadTree(snap::Repo& r) {
  auto head = r.Head();
  REQUIRE(head);
  REQUIRE(*head);
  return TreeOf(r, **head);
}

inline store::ObjectId FullScanTree(snap::Repo& r) {
  auto t = r.LiveTree();
  REQUIRE(t);
  return *t;
}

}  // namespace agentenv::test
