// The on-disk side of workspaces (control/workspace.h).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/write_all.h"
#include "control/fields.h"
#include "control/session.h"
#include "control/workspace.h"
#include "snap/fsops.h"
#include "snap/layout.h"

namespace agentenv::control {
namespace {

struct State {
  std::string base, head, lower, tournament;
  int64_t created_ns = 0;
  template <class V> void Fields(V& v) {
    v("base", base); v("head", head); v("lower", lower); v("created_ns", created_ns); v("tournament", tournament);
  }
};

std::string DirOf(const std::string& root, const std::string& name) {
  return snap::layout::Workspaces(root) + "/" + name;
}

Result<void> WriteDurably(const std::string& dir, const std::string& name, const std::string& data) {
  std::string tmp = dir + "/." + name + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return FailErrno(tmp, errno);
  AE_TRY(WriteAll(fd.get(), data.data(), data.size(), tmp));
  if (::fsync(fd.get()) != 0) return FailErrno(tmp, errno);
  if (::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) return FailErrno(dir + "/" + name, errno);
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d) ::fsync(d.get());
  return {};
}

}  // namespace

Result<Workspace> CreateWorkspace(const std::string& root, const std::string& name, const store::ObjectId& base,
                                  const std::string& lower, const std::string& tournament) {
  AE_TRY(CheckName("workspace", name));
  std::string all = snap::layout::Workspaces(root);
  if (::mkdir(all.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(all, errno);
  Workspace ws{name, DirOf(root, name), base, base, lower, 0, tournament};
  // Made under a temporary name: a workspace exists whole or not at all.
  std::string tmp = all + "/.new-" + name + "-XXXXXX";
  if (!::mkdtemp(tmp.data())) return FailErrno(tmp, errno);
  for (const char* d : {"/upper", "/work", "/root"})
    if (::mkdir((tmp + d).c_str(), 0755) != 0) return FailErrno(tmp + d, errno);
  // The overlay's root takes the upper root's metadata: give it the
  // lower's, so an untouched workspace equals its node.
  struct stat st;
  if (::stat(lower.c_str(), &st) == 0) {
    if (::geteuid() == 0) (void)!::chown((tmp + "/upper").c_str(), st.st_uid, st.st_gid);
    ::chmod((tmp + "/upper").c_str(), st.st_mode & 07777);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    ::utimensat(AT_FDCWD, (tmp + "/upper").c_str(), ts, 0);
  }
  UniqueFd lock(::open((tmp + "/lock").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) return FailErrno(tmp + "/lock", errno);
  ws.created_ns = snap::NowNs();
  State s{base.Hex(), base.Hex(), lower, tournament, ws.created_ns};
  AE_TRY(WriteDurably(tmp, "state", ToJson(s).dump()));
  if (::rename(tmp.c_str(), ws.dir.c_str()) != 0) {
    int e = errno;
    (void)snap::RemoveTree(tmp);
    if (e == EEXIST || e == ENOTEMPTY)
      return Fail(ErrorCode::kExists, "workspace '" + name + "' exists (agentenv workspace rm " + name + ")");
    return FailErrno(ws.dir, e);
  }
  return ws;
}

Result<Workspace> LoadWorkspace(const std::string& root, const std::string& name) {
  AE_TRY(CheckName("workspace", name));
  Workspace ws;
  ws.name = name;
  ws.dir = DirOf(root, name);
  std::ifstream in(ws.dir + "/state");
  if (!in) return Fail(ErrorCode::kNotFound, "workspace '" + name + "': no such workspace (see agentenv workspace ls)");
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  auto s = ReadReply<State>("workspace state", j);
  if (!s) return Fail(ErrorCode::kCorrupt, ws.dir + "/state: " + s.error().message);
  AE_ASSIGN(ws.base, store::ObjectId::FromHex(s->base));
  AE_ASSIGN(ws.head, store::ObjectId::FromHex(s->head));
  ws.lower = s->lower;
  ws.created_ns = s->created_ns;
  ws.tournament = s->tournament;
  return ws;
}

Result<void> SaveWorkspace(const Workspace& ws) {
  State s{ws.base.Hex(), ws.head.Hex(), ws.lower, ws.tournament, ws.created_ns};
  return WriteDurably(ws.dir, "state", ToJson(s).dump());
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

Result<UniqueFd> LockWorkspace(const Workspace& ws) {
  std::string path = ws.dir + "/lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return FailErrno(path, errno);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Fail(ErrorCode::kBusy, "workspace '" + ws.name + "' is busy: a command runs in it");
    return FailErrno(path, errno);
  }
  return fd;
}

bool WorkspaceBusy(const Workspace& ws) { return !LockWorkspace(ws); }

Result<void> RemoveWorkspace(const Workspace& ws) {
  AE_ASSIGN(UniqueFd lock, LockWorkspace(ws));
  // Renamed aside first: a crash mid-removal leaves no half workspace.
  std::string gone = std::filesystem::path(ws.dir).parent_path().string() + "/.rm-" + ws.name;
  (void)snap::RemoveTree(gone);
  if (::rename(ws.dir.c_str(), gone.c_str()) != 0) return FailErrno(ws.dir, errno);
  return snap::RemoveTree(gone);
}

}  // namespace agentenv::control
