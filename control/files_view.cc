#include "control/files_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <deque>

#include "history/node_view.h"
#include "snap/fsops.h"
#include "snap/layout.h"

namespace agentenv::control {
namespace {

constexpr int kMaxLinks = 40;  // Linux's own bound (ELOOP)


class NodeView : public FileView {
 public:
  NodeView(Server& s, store::ObjectId node, store::ObjectId root) : s_(s), node_(node) { dirs_[""] = root; }

  Result<ViewEntry> Lstat(const std::string& rel) override {
    if (rel.empty()) return ViewEntry{"", "dir", 0, ""};
    AE_ASSIGN(const snap::Tree* t, TreeAt(ParentOf(rel), rel));
    std::string name = BaseOf(rel);
    auto it = std::lower_bound(t->begin(), t->end(), name, [](const snap::Entry& e, const std::string& n) { return e.name < n; });
    if (it == t->end() || it->name != name) return Fail(ErrorCode::kNotFound, rel + ": not in " + Where());
    if (it->kind == snap::Kind::kDir) dirs_[rel] = it->id;
    return ViewEntry{it->name, std::string(snap::KindName(it->kind)), it->size, it->target};
  }

  Result<std::vector<ViewEntry>> List(const std::string& rel) override {
    AE_ASSIGN(const snap::Tree* t, TreeAt(rel, rel));
    std::vector<ViewEntry> out;
    for (const snap::Entry& e : *t) {
      out.push_back({e.name, std::string(snap::KindName(e.kind)), e.size, e.target});
      if (e.kind == snap::Kind::kDir) dirs_[snap::Join(rel, e.name)] = e.id;
    }
    return out;
  }

  Result<std::string> Read(const std::string& rel, uint64_t limit, bool* more) override {
    AE_ASSIGN(snap::Entry e, EntryAt(rel));
    if (e.kind == snap::Kind::kHardlink) {
      AE_ASSIGN(e, EntryAt(e.target));
    }
    if (e.kind != snap::Kind::kFile)
      return Fail(ErrorCode::kInvalid, rel + ": a " + std::string(snap::KindName(e.kind)) + ", not a file");
    std::string bytes;
    *more = false;
    bool stopped = false;
    auto r = s_.repo().store().ReadFile(e.file(), [&](std::span<const uint8_t> chunk) -> Result<void> {
      size_t take = std::min<uint64_t>(chunk.size(), limit - bytes.size());
      bytes.append(reinterpret_cast<const char*>(chunk.data()), take);
      if (take < chunk.size() || bytes.size() == limit) {
        stopped = true;
        return Fail(ErrorCode::kInvalid, "enough");  // ends the read early
      }
      return {};
    });
    if (!r && !stopped) return Unexpected<Error>(r.error());
    *more = stopped && e.size > bytes.size();
    return bytes;
  }

  std::string Where() const override { return "node " + history::Short(node_); }
  std::string Node() const override { return history::Short(node_); }

 private:
  Result<snap::Entry> EntryAt(const std::string& rel) {
    AE_ASSIGN(const snap::Tree* t, TreeAt(ParentOf(rel), rel));
    std::string name = BaseOf(rel);
    for (const snap::Entry& e : *t)
      if (e.name == name) return e;
    return Fail(ErrorCode::kNotFound, rel + ": not in " + Where());
  }
  // The tree of directory `dir` (resolved: its parents were looked up).
  Result<const snap::Tree*> TreeAt(const std::string& dir, const std::string& rel) {
    auto d = dirs_.find(dir);
    if (d == dirs_.end()) {
      AE_ASSIGN(ViewEntry e, Lstat(dir));
      if (e.kind != "dir") return Fail(ErrorCode::kNotFound, rel + ": not in " + Where() + " (" + dir + " is no directory)");
      d = dirs_.find(dir);
    }
    auto t = trees_.find(d->second);
    if (t == trees_.end()) {
      AE_ASSIGN(snap::Tree tree, snap::LoadTree(s_.repo().store(), d->second));
      t = trees_.emplace(d->second, std::move(tree)).first;
    }
    return &t->second;
  }

  Server& s_;
  store::ObjectId node_;
  std::map<std::string, store::ObjectId> dirs_;  // resolved directory -> its tree
  std::map<store::ObjectId, snap::Tree> trees_;
};

std::string KindOf(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  if (S_ISFIFO(m)) return "fifo";
  if (S_ISCHR(m)) return "char";
  if (S_ISBLK(m)) return "block";
  return "socket";
}

class LiveView : public FileView {
 public:
  explicit LiveView(UniqueFd root) : root_(std::move(root)) {}

  Result<ViewEntry> Lstat(const std::string& rel) override {
    if (rel.empty()) return ViewEntry{"", "dir", 0, ""};
    AE_ASSIGN(UniqueFd dir, OpenBeneath(root_.get(), ParentOf(rel), O_PATH | O_DIRECTORY, rel));
    return StatAt(dir.get(), BaseOf(rel), rel);
  }

  Result<std::vector<ViewEntry>> List(const std::string& rel) override {
    AE_ASSIGN(UniqueFd fd, OpenBeneath(root_.get(), rel, O_RDONLY | O_DIRECTORY, rel.empty() ? "/" : rel));
    int dfd = ::dup(fd.get());
    if (dfd < 0) return FailErrno(rel, errno);
    DIR* d = ::fdopendir(dfd);
    if (!d) {
      ::close(dfd);
      return FailErrno(rel, errno);
    }
    std::vector<ViewEntry> out;
    while (dirent* de = ::readdir(d)) {
      std::string name = de->d_name;
      if (name == "." || name == "..") continue;
      auto e = StatAt(fd.get(), name, snap::Join(rel, name));
      if (e) out.push_back(std::move(*e));  // gone meanwhile: not listed
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const ViewEntry& a, const ViewEntry& b) { return a.name < b.name; });
    return out;
  }

  Result<std::string> Read(const std::string& rel, uint64_t limit, bool* more) override {
    AE_ASSIGN(UniqueFd fd, OpenBeneath(root_.get(), rel, O_RDONLY | O_NOCTTY | O_NONBLOCK, rel));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return FailErrno(rel, errno);
    if (!S_ISREG(st.st_mode)) return Fail(ErrorCode::kInvalid, rel + ": a " + KindOf(st.st_mode) + ", not a file");
    std::string bytes(std::min<uint64_t>(limit, uint64_t(st.st_size)), '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t n = ::pread(fd.get(), bytes.data() + got, bytes.size() - got, off_t(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FailErrno(rel, errno);
      if (n == 0) break;
      got += size_t(n);
    }
    bytes.resize(got);
    *more = uint64_t(st.st_size) > got;
    return bytes;
  }

  std::string Where() const override { return "the live tree"; }
  std::string Node() const override { return ""; }

 private:
  static Result<ViewEntry> StatAt(int dir, const std::string& name, const std::string& rel) {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return Fail(ErrorCode::kNotFound, rel + ": not in the live tree");
      return FailErrno(rel, errno);
    }
    ViewEntry e{name, KindOf(st.st_mode), S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0, ""};
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof buf);
      if (n < 0) return FailErrno(rel, errno);
      e.target.assign(buf, size_t(n));
    }
    return e;
  }

  UniqueFd root_;
};

}  // namespace

std::string ParentOf(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}
std::string BaseOf(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? rel : rel.substr(slash + 1);
}

Result<UniqueFd> OpenBeneath(int root_fd, const std::string& rel, int flags, const std::string& what) {
  open_how how{};
  how.flags = uint64_t(flags | O_CLOEXEC | O_NOFOLLOW);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  if (flags & O_PATH) how.flags &= ~uint64_t(O_NOFOLLOW);  // a directory's O_PATH: no link is allowed anyway
  const std::string path = rel.empty() ? "." : rel;
  long fd = ::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Fail(ErrorCode::kNotFound, what + ": not in the live tree");
    if (errno == ELOOP) return Fail(ErrorCode::kInvalid, what + ": a symbolic link appeared on the way (changed meanwhile)");
    return FailErrno(what, errno);
  }
  return UniqueFd(int(fd));
}

Result<std::unique_ptr<FileView>> OpenView(Server& s, const std::string& ref) {
  if (ref.empty()) {
    std::string work = s.repo().work_dir();
    UniqueFd root(::open(work.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) return FailErrno(work, errno);
    return std::unique_ptr<FileView>(new LiveView(std::move(root)));
  }
  AE_ASSIGN(store::ObjectId node, s.repo().Resolve(ref));
  AE_ASSIGN(snap::NodeRecord rec, s.repo().Record(node));
  return std::unique_ptr<FileView>(new NodeView(s, node, rec.tree));
}

Result<std::string> ResolveIn(FileView& view, const std::string& path, bool follow_last) {
  std::deque<std::string> todo;
  for (std::string& c : snap::SplitPath(path)) todo.push_back(std::move(c));
  std::vector<std::string> done;
  int links = 0;
  auto joined = [&] {
    std::string out;
    for (const std::string& c : done) out = snap::Join(out, c);
    return out;
  };
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c.empty() || c == ".") continue;
    if (c == "..") {  // at the root, ".." is the root (as in a chroot)
      if (!done.empty()) done.pop_back();
      continue;
    }
    done.push_back(c);
    const std::string rel = joined();
    AE_ASSIGN(ViewEntry e, view.Lstat(rel));
    if (e.kind == "symlink" && (!todo.empty() || follow_last)) {
      if (++links > kMaxLinks) return Fail(ErrorCode::kInvalid, path + ": too many levels of symbolic links");
      done.pop_back();
      if (e.target.starts_with('/')) done.clear();
      std::vector<std::string> target = snap::SplitPath(e.target);
      todo.insert(todo.begin(), target.begin(), target.end());
      continue;
    }
    if (!todo.empty() && e.kind != "dir")
      return Fail(ErrorCode::kNotFound, path + ": not in " + view.Where() + " (" + rel + " is no directory)");
  }
  return joined();
}

}  // namespace agentenv::control
