// The scoped-token operations of control::Server (control/tokens.h).
#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "control/server.h"
#include "control/tokens.h"
#include "snap/fsops.h"

namespace agentenv::control {
namespace {

TokenInfo Describe(const StoredToken& t, int64_t now_ns) {
  return {t.id, t.env, t.read_only, FormatTime(t.created_ns), t.expires_ns ? FormatTime(t.expires_ns) : "",
          t.expires_ns != 0 && t.expires_ns <= now_ns};
}

}  // namespace

Result<TokenCreateReply> Server::TokenCreate(const TokenCreateRequest& r) {
  // A token for a workspace that is not there is most likely a typo.
  if (!r.env.empty()) AE_TRY(workspace::LoadWorkspace(repo_->root(), r.env));
  int64_t expires_ns = 0;
  if (!r.expires.empty()) {
    AE_ASSIGN(int64_t d, ParseDuration(r.expires));
    expires_ns = snap::NowNs() + d;
  }
  AE_ASSIGN(auto made, CreateToken(repo_->root(), r.env, r.read_only, expires_ns));
  return TokenCreateReply{Describe(made.first, snap::NowNs()), made.second};
}

Result<TokenLsReply> Server::TokenLs(const TokenLsRequest&) {
  AE_ASSIGN(auto all, LoadTokens(repo_->root()));
  TokenLsReply rep;
  const int64_t now = snap::NowNs();
  for (const auto& t : all) rep.tokens.push_back(Describe(t, now));
  return rep;
}

Result<TokenRevokeReply> Server::TokenRevoke(const TokenRevokeRequest& r) {
  if (r.id.empty()) return Fail(ErrorCode::kInvalid, "token revoke: give the token's id (see agentenv token ls)");
  AE_ASSIGN(bool existed, RevokeToken(repo_->root(), r.id));
  return TokenRevokeReply{r.id, existed};
}

}  // namespace agentenv::control

namespace agentenv::control {
namespace {

// Bytes on disk of everything under `dir` (a workspace's upper), not
// following symlinks nor crossing into other filesystems.
uint64_t DiskUse(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  struct stat st;
  if (::lstat(dir.c_str(), &st) == 0) bytes += uint64_t(st.st_blocks) * 512;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (::lstat(it->path().c_str(), &st) == 0) bytes += uint64_t(st.st_blocks) * 512;
  return bytes;
}

}  // namespace

Result<EnvLsReply> Server::EnvLs(const EnvLsRequest&) {
  EnvLsReply rep;
  std::map<std::string, uint64_t> running;
  for (const auto& j : jobs_.List()) {
    MutexLock lock(j->mu);
    j->PollLocked();
    if (!j->status) ++running[j->workspace];
  }
  AE_ASSIGN(auto tokens, LoadTokens(repo_->root()));
  const int64_t now = snap::NowNs();
  auto scopes = [&](const std::string& env) {
    std::vector<EnvScope> out;
    for (const auto& t : tokens)
      if (t.env == env && !(t.expires_ns && t.expires_ns <= now))
        out.push_back({t.id, t.read_only, t.expires_ns ? FormatTime(t.expires_ns) : ""});
    return out;
  };
  EnvInfo live;
  live.endpoint = "/mcp";
  AE_ASSIGN(auto head, repo_->Head());
  if (head) live.last = head->Hex();
  live.running = running[""];
  live.tokens = scopes("");
  rep.environments.push_back(std::move(live));
  AE_ASSIGN(auto all, workspace::ListWorkspaces(repo_->root()));
  for (const auto& ws : all) {
    EnvInfo e;
    e.name = ws.name;
    e.endpoint = "/w/" + ws.name + "/mcp";
    e.base = ws.base.Hex();
    e.last = ws.head.Hex();
    e.running = running[ws.name];
    e.busy = workspace::WorkspaceBusy(ws);
    e.disk_bytes = DiskUse(ws.upper());
    e.tokens = scopes(ws.name);
    rep.environments.push_back(std::move(e));
  }
  return rep;
}

}  // namespace agentenv::control
