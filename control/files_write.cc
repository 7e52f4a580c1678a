// write_file (control/files.h): a whole file or a patch, written into the
// live tree and snapshotted under one hold of the writer mutex.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/files.h"
#include "control/files_view.h"
#include "control/patch.h"
#include "snap/fsops.h"

namespace agentenv::control {
namespace {

constexpr uint64_t kMaxWrite = uint64_t{64} << 20;


Result<void> WriteAll(int fd, std::string_view bytes, const std::string& what) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(what, errno);
    bytes.remove_prefix(size_t(n));
  }
  return {};
}

// The directory `dir` (tree-relative, as given) resolved, creating the
// components that are missing (0755, owned like their parent). *made: the
// first directory created, if any.
Result<std::string> MakeDirs(FileView& view, int root_fd, const std::string& dir, std::string* made) {
  std::string cur;
  for (const std::string& c : snap::SplitPath(dir)) {
    std::string next = snap::Join(cur, c);
    auto r = ResolveIn(view, next, true);
    if (r) {
      AE_ASSIGN(ViewEntry e, view.Lstat(*r));
      if (e.kind != "dir") return Fail(ErrorCode::kInvalid, dir + ": " + *r + " is a " + e.kind + ", not a directory");
      cur = *r;
      continue;
    }
    if (r.error().code != ErrorCode::kNotFound) return Unexpected<Error>(r.error());
    AE_ASSIGN(UniqueFd parent, OpenBeneath(root_fd, cur, O_RDONLY | O_DIRECTORY, cur.empty() ? "/" : cur));
    if (::mkdirat(parent.get(), c.c_str(), 0755) != 0) return FailErrno(next, errno);
    struct stat st {};
    if (::fstat(parent.get(), &st) == 0) (void)::fchownat(parent.get(), c.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    if (made->empty()) *made = next;
    cur = next;
  }
  return cur;
}

}  // namespace

Result<WriteFileReply> WriteFile(Server& s, const WriteFileRequest& r, const CallContext& call) {
  AE_ASSIGN(std::string given, snap::TreePath(r.path));
  if (given.empty()) return Fail(ErrorCode::kInvalid, "write_file: give the path of a file");
  if (bool(r.content) == bool(r.patch)) return Fail(ErrorCode::kInvalid, "write_file: give either content or patch");
  if (r.content && r.content->size() > kMaxWrite) return Fail(ErrorCode::kInvalid, "write_file: content over 64 MiB");

  auto writer = s.LockWriters();
  const std::string work = s.repo().work_dir();
  UniqueFd root(::open(work.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return FailErrno(work, errno);
  AE_ASSIGN(auto view, OpenView(s, ""));
  // Missing parents are made only once the patch applied: a call that
  // fails changes nothing.
  std::string target;
  std::optional<std::string> old;
  struct stat old_st {};
  {
    auto parent = ResolveIn(*view, ParentOf(given), true);
    if (parent) {
      target = snap::Join(*parent, BaseOf(given));
      auto e = view->Lstat(target);
      if (e && e->kind == "symlink") {
        AE_ASSIGN(target, ResolveIn(*view, target, true));  // a dangling link: kNotFound
        AE_ASSIGN(e, view->Lstat(target));
      }
      if (e) {
        if (e->kind != "file") return Fail(ErrorCode::kInvalid, r.path + ": a " + e->kind + ", not a file");
        bool more = false;
        AE_ASSIGN(std::string bytes, view->Read(target, kMaxWrite, &more));
        if (more) return Fail(ErrorCode::kInvalid, r.path + ": over 64 MiB; edit it with exec");
        old = std::move(bytes);
        AE_ASSIGN(UniqueFd dir, OpenBeneath(root.get(), ParentOf(target), O_PATH | O_DIRECTORY, target));
        if (::fstatat(dir.get(), BaseOf(target).c_str(), &old_st, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(target, errno);
      } else if (e.error().code != ErrorCode::kNotFound) {
        return Unexpected<Error>(e.error());
      }
    } else if (parent.error().code != ErrorCode::kNotFound) {
      return Unexpected<Error>(parent.error());
    }
  }
  std::string bytes;
  if (r.content) {
    bytes = *r.content;
  } else {
    AE_ASSIGN(bytes, ApplyPatch(old ? *old : std::string(), *r.patch));
  }
  WriteFileReply rep;
  rep.bytes = bytes.size();
  rep.created = !old;
  std::string made;
  if (!old) {
    AE_ASSIGN(std::string dir, MakeDirs(*view, root.get(), ParentOf(given), &made));
    target = snap::Join(dir, BaseOf(given));
  }
  rep.path = target;
  if (old && *old == bytes) return rep;  // already so: no node

  AE_ASSIGN(UniqueFd dir, OpenBeneath(root.get(), ParentOf(target), O_RDONLY | O_DIRECTORY, ParentOf(target).empty() ? "/" : ParentOf(target)));
  const std::string name = BaseOf(target);
  const std::string tmp = ".write_file." + std::to_string(::getpid()) + "." + name.substr(0, 100);
  struct stat dir_st {};
  if (::fstat(dir.get(), &dir_st) != 0) return FailErrno(ParentOf(target), errno);
  UniqueFd out(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return FailErrno(snap::Join(ParentOf(target), tmp), errno);
  auto written = [&]() -> Result<void> {
    AE_TRY(WriteAll(out.get(), bytes, target));
    const mode_t mode = old ? (old_st.st_mode & 07777) : 0644;
    if (::fchmod(out.get(), mode) != 0) return FailErrno(target, errno);
    // Owned as before, or like its directory; an unprivileged server keeps its own.
    (void)::fchown(out.get(), old ? old_st.st_uid : dir_st.st_uid, old ? old_st.st_gid : dir_st.st_gid);
    if (::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) return FailErrno(target, errno);
    return {};
  }();
  if (!written) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    return Unexpected<Error>(written.error());
  }

  snap::SnapOptions opt;
  opt.label = "write_file " + target;
  opt.message = r.message;
  snap::Provenance prov;
  prov.kind = snap::ProvenanceKind::kSnapshot;
  prov.who = call.who;
  prov.message = r.message;
  opt.provenance = std::move(prov);
  opt.paths = std::vector<std::string>{made.empty() ? target : made};
  AE_ASSIGN(snap::SnapResult res, s.repo().Snapshot(opt));
  if (res.node) {
    AE_ASSIGN(snap::NodeRecord rec, s.repo().Record(*res.node));
    rep.node = MakeNodeInfo(rec);
  }
  return rep;
}

}  // namespace agentenv::control
