// Workspaces on disk: made, locked, used, listed and removed (workspace/workspace.h).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "workspace/workspace.h"

#include "common/durable.h"
#include "common/fields.h"
#include "common/read_all.h"
#include "common/text.h"
#include "snap/fsops.h"
#include "snap/layout.h"
#include "snap/scratch.h"

namespace agentenv::workspace {
namespace {

struct State {
  std::string base, head, lower, tournament, lease;
  int64_t created_ns = 0;
  uint64_t disk_bytes = 0;
  uint64_t generation = 0;
  template <class V> void Fields(V& v) {
    v("base", base); v("head", head); v("lower", lower); v("created_ns", created_ns); v("tournament", tournament);
    v("lease", lease); v("disk_bytes", disk_bytes); v("generation", generation, kOmitEmpty);
  }
};

// The upper's root takes the lower's metadata: an untouched workspace
// equals its node.
void TakeRootMetadata(const std::string& lower, const std::string& upper) {
  struct stat st;
  if (::stat(lower.c_str(), &st) != 0) return;
  if (::geteuid() == 0) (void)!::chown(upper.c_str(), st.st_uid, st.st_gid);
  ::chmod(upper.c_str(), st.st_mode & 07777);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  ::utimensat(AT_FDCWD, upper.c_str(), ts, 0);
}

constexpr std::string_view kLeaseHolder = "ws/";

std::string DirOf(const std::string& root, const std::string& name) {
  return snap::layout::Workspaces(root) + "/" + name;
}

// The workspace lock is an OFD lock (fcntl F_OFD_SETLK) on the whole
// `lock` file. Like a flock it belongs to the open file, so an env that
// holds the descriptor keeps it however its caller ends; unlike a flock it
// can be tested without being taken (F_OFD_GETLK), so a look at whether a
// workspace is busy (`workspace ls`, a tournament's sweep) never makes a
// command that wants it see busy. Its holder writes what it is into the
// file, which the busy error quotes.
struct flock WholeFile(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  return fl;
}

Result<void> TakeLock(int fd, const std::string& path, const std::string& name, std::string_view holder) {
  struct flock fl = WholeFile(F_WRLCK);
  if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    if (errno != EAGAIN && errno != EACCES) return FailErrno(path, errno);
    char buf[256];
    ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    std::string who = n > 0 ? std::string(buf, size_t(n)) : "another command";
    return Fail(ErrorCode::kBusy, "workspace '" + name + "' is busy: " + who + " uses it; retry when it ends");
  }
  std::string text = std::string(holder) + " (pid " + std::to_string(::getpid()) + ")";
  if (::pwrite(fd, text.data(), text.size(), 0) != ssize_t(text.size()) || ::ftruncate(fd, off_t(text.size())) != 0)
    return FailErrno(path, errno);
  return {};
}

}  // namespace

Result<Workspace> CreateWorkspace(snap::Repo& repo, const std::string& name, const store::ObjectId& base,
                                  const std::string& lower, const std::string& tournament, uint64_t disk_bytes,
                                  UniqueFd* held, std::string_view holder) {
  AE_TRY(CheckName("workspace", name));
  const std::string& root = repo.root();
  std::string all = snap::layout::Workspaces(root);
  if (::mkdir(all.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(all, errno);
  Workspace ws{name, DirOf(root, name), base, base, lower, 0, tournament};
  ws.disk_bytes = disk_bytes;
  if (::access(ws.dir.c_str(), F_OK) == 0)
    return Fail(ErrorCode::kExists, "workspace '" + name + "' exists (agentenv workspace rm " + name + ")");
  // What killed creations and removals left here goes first.
  (void)snap::ReclaimLeftovers(all, {".new-", ".rm-"}, true);
  // Made under a scratch name, locked by us: a workspace exists whole or
  // not at all, and a killed creation leaves scratch that gc reclaims.
  AE_ASSIGN(snap::ScratchDir scratch, snap::ScratchDir::Make(all, ".new-" + name));
  const std::string& tmp = scratch.path();
  // The lease is named after the scratch directory (".new-<name>-XXXXXX"):
  // unique, and while that is locked ReleaseOrphanLeases keeps the lease.
  ws.lease = std::string(kLeaseHolder) + std::filesystem::path(tmp).filename().string().substr(5);
  AE_TRY(repo.LeaseNode(ws.lease, base));
  bool made = false;
  struct Release {
    snap::Repo& repo;
    const std::string& holder;
    const bool& made;
    ~Release() {
      if (!made) (void)repo.ReleaseNode(holder);
    }
  } release{repo, ws.lease, made};
  for (const char* d : {"/upper", "/work", "/root"})
    if (::mkdir((tmp + d).c_str(), 0755) != 0) return FailErrno(tmp + d, errno);
  TakeRootMetadata(lower, tmp + "/upper");
  UniqueFd lock(::open((tmp + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) return FailErrno(tmp + "/lock", errno);
  // Locked before it has its name: nobody sees it free in between.
  if (held) AE_TRY(TakeLock(lock.get(), tmp + "/lock", name, holder));
  ws.created_ns = snap::NowNs();
  State s{base.Hex(), base.Hex(), lower, tournament, ws.lease, ws.created_ns, disk_bytes};
  AE_TRY(WriteFileDurably(tmp, "state", ToJson(s).dump(), 0600));
  if (auto moved = scratch.MoveTo(ws.dir); !moved) {
    if (moved.error().code == ErrorCode::kExists)
      return Fail(ErrorCode::kExists, "workspace '" + name + "' exists (agentenv workspace rm " + name + ")");
    return Unexpected<Error>(moved.error());
  }
  made = true;
  AE_TRY(FsyncDir(all));
  if (held) *held = std::move(lock);
  return ws;
}

Result<Workspace> LoadWorkspace(const std::string& root, const std::string& name) {
  AE_TRY(CheckName("workspace", name));
  Workspace ws;
  ws.name = name;
  ws.dir = DirOf(root, name);
  auto text = ReadFileUpTo(ws.dir + "/state", 1 << 20);  // a few ids and numbers
  if (!text) return Fail(ErrorCode::kNotFound, "workspace '" + name + "': no such workspace (see agentenv workspace ls)");
  json j = json::parse(*text, nullptr, false);
  auto s = ReadReply<State>("workspace state", j);
  if (!s) return Fail(ErrorCode::kCorrupt, ws.dir + "/state: " + s.error().message);
  AE_ASSIGN(ws.base, store::ObjectId::FromHex(s->base));
  AE_ASSIGN(ws.head, store::ObjectId::FromHex(s->head));
  ws.lower = s->lower;
  ws.created_ns = s->created_ns;
  ws.tournament = s->tournament;
  ws.lease = s->lease;
  ws.disk_bytes = s->disk_bytes;
  ws.generation = s->generation;
  return ws;
}

Result<void> SaveWorkspace(const Workspace& ws) {
  State s{ws.base.Hex(), ws.head.Hex(), ws.lower, ws.tournament, ws.lease, ws.created_ns, ws.disk_bytes,
          ws.generation};
  return WriteFileDurably(ws.dir, "state", ToJson(s).dump(), 0600);
}

Result<std::vector<Workspace>> ListWorkspaces(const std::string& root) {
  std::vector<Workspace> out;
  std::string all = snap::layout::Workspaces(root);
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(all, ec)) {
    std::string n = e.path().filename().string();
    if (!n.empty() && n[0] != '.') names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    auto ws = LoadWorkspace(root, n);
    if (ws) out.push_back(std::move(*ws));
  }
  return out;
}

Result<UniqueFd> LockWorkspace(const Workspace& ws, std::string_view holder) {
  std::string path = ws.dir + "/lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd && errno == ENOENT) return Fail(ErrorCode::kNotFound, "workspace '" + ws.name + "': no such workspace (removed meanwhile)");
  if (!fd) return FailErrno(path, errno);
  AE_TRY(TakeLock(fd.get(), path, ws.name, holder));
  return fd;
}

Result<WorkspaceInUse> UseWorkspace(snap::Repo& repo, const std::string& name, std::string_view holder) {
  WorkspaceInUse u;
  AE_ASSIGN(u.ws, LoadWorkspace(repo.root(), name));
  AE_ASSIGN(u.lock, LockWorkspace(u.ws, holder));
  AE_ASSIGN(u.ws, LoadWorkspace(repo.root(), name));  // a reset that held the lock may have switched it
  AE_ASSIGN(u.lower, repo.LeaseLower(u.ws.base));
  bool changed = false;
  if (u.lower.dir() != u.ws.lower) {  // the root was given another way, or an older layout
    u.ws.lower = u.lower.dir();
    changed = true;
  }
  if (u.ws.lease.empty()) {  // made before workspaces leased their base
    u.ws.lease = std::string(kLeaseHolder) + name + "-v1";
    AE_TRY(repo.LeaseNode(u.ws.lease, u.ws.base));
    changed = true;
  }
  if (changed) AE_TRY(SaveWorkspace(u.ws));
  return u;
}

bool WorkspaceBusy(const Workspace& ws) {
  UniqueFd fd(::open((ws.dir + "/lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct flock fl = WholeFile(F_WRLCK);
  return fd && ::fcntl(fd.get(), F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

std::string NextLease(const Workspace& ws) { return ws.lease + ".next"; }

Result<void> ResetWorkspace(snap::Repo& repo, Workspace& ws, const store::ObjectId& node, const std::string& lower) {
  Workspace next = ws;
  next.base = next.head = node;
  next.lower = lower;
  next.generation = ws.generation + 1;
  // The next pair, empty (what a reset killed here made goes first).
  for (const std::string& d : {next.upper(), next.work()}) {
    AE_TRY(snap::RemoveTree(d));
    if (::mkdir(d.c_str(), 0755) != 0) return FailErrno(d, errno);
  }
  TakeRootMetadata(lower, next.upper());
  AE_TRY(FsyncDir(ws.dir));
  AE_TRY(repo.LeaseNode(NextLease(ws), node));
  AE_TRY(SaveWorkspace(next));  // the switch
  AE_TRY(repo.LeaseNode(ws.lease, node));
  AE_TRY(repo.ReleaseNode(NextLease(ws)));
  ws = std::move(next);
  return DropStaleDirectories(ws);
}

Result<void> DropStaleDirectories(const Workspace& ws) {
  const std::string current_upper = "upper" + ws.Suffix(), current_work = "work" + ws.Suffix();
  std::vector<std::string> stale;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ws.dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool pair = n == "upper" || n == "work" || n.starts_with("upper.") || n.starts_with("work.");
    if ((pair && n != current_upper && n != current_work) || n.starts_with(".rm-")) stale.push_back(n);
  }
  if (ec) return FailErrno(ws.dir, ec.value());
  // Renamed aside first: a kill mid-removal leaves a .rm- entry, never a
  // half pair under a name a reset would make again.
  for (const std::string& n : stale) {
    std::string path = ws.dir + "/" + n;
    if (!n.starts_with(".rm-")) {
      const std::string aside = ws.dir + "/.rm-" + n;
      if (::rename(path.c_str(), aside.c_str()) != 0) return FailErrno(path, errno);
      path = aside;
    }
    AE_TRY(snap::RemoveTree(path));
  }
  return {};
}

Result<void> RemoveWorkspace(snap::Repo& repo, const Workspace& ws, UniqueFd held) {
  UniqueFd lock = std::move(held);
  if (!lock) {
    AE_ASSIGN(lock, LockWorkspace(ws, "workspace rm"));
  }
  // Renamed aside first (snap::Retire): a kill mid-removal leaves a `.rm-`
  // directory, which the retried `workspace rm`, gc and the next fork
  // finish, never a half workspace under its name. The lease goes last: a
  // kill before leaves one that ReleaseOrphanLeases finds.
  AE_ASSIGN(snap::DirLock dir, snap::DirLock::TryExclusive(ws.dir));
  AE_TRY(snap::Retire(std::move(dir)));
  if (!ws.lease.empty()) AE_TRY(repo.ReleaseNode(ws.lease));
  return {};
}

Result<uint64_t> ReleaseOrphanLeases(snap::Repo& repo) {
  AE_ASSIGN(auto leases, repo.NodeLeases());
  const std::string all = snap::layout::Workspaces(repo.root());
  std::optional<std::map<std::string, Workspace>> held;  // the leases workspaces' states name
  uint64_t released = 0;
  for (const auto& [holder, id] : leases) {
    if (!holder.starts_with(kLeaseHolder)) continue;
    // Being made: its scratch directory is locked by the command making
    // it. Looked at before the states: a creation moves its directory
    // into place before it unlocks, so one not found here is found there.
    auto making = snap::DirLock::TryExclusive(all + "/.new-" + holder.substr(kLeaseHolder.size()));
    if (!making && making.error().code == ErrorCode::kBusy) continue;
    if (!held) {
      held.emplace();
      AE_ASSIGN(auto spaces, ListWorkspaces(repo.root()));
      for (auto& ws : spaces) held->emplace(ws.lease, std::move(ws));
    }
    if (held->count(holder)) continue;
    // A reset's next lease (ResetWorkspace): while the workspace is locked
    // the reset may still run; after a kill, a state that names its node
    // means the switch was made, and the workspace's lease moves there.
    if (holder.ends_with(".next")) {
      auto ws = held->find(holder.substr(0, holder.size() - 5));
      if (ws != held->end() && WorkspaceBusy(ws->second)) continue;
      if (ws != held->end() && ws->second.base == id) AE_TRY(repo.LeaseNode(ws->first, id));
    }
    AE_TRY(repo.ReleaseNode(holder));
    ++released;
  }
  return released;
}

Result<bool> FinishRemoval(snap::Repo& repo, const std::string& name) {
  AE_TRY(CheckName("workspace", name));
  std::string all = snap::layout::Workspaces(repo.root());
  bool found = false;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(all, ec)) {
    if (!snap::IsRetiredName(e.path().filename().string(), name)) continue;
    AE_ASSIGN(snap::DirLock lock, snap::DirLock::TryExclusive(e.path().string()));
    AE_TRY(snap::Retire(std::move(lock)));
    found = true;
  }
  if (found) AE_TRY(ReleaseOrphanLeases(repo));
  return found;
}

}  // namespace agentenv::workspace
