#include "control/client.h"

#include <span>

#include "control/daemon_call.h"
#include "control/errors.h"
#include "control/open_repo.h"
#include "snap/layout.h"

namespace agentenv::control {

Client::Client(std::string root) : root_(std::move(root)) {}
Client::~Client() = default;

Result<Server*> Client::Local() {
  std::lock_guard lock(local_mu_);
  if (!local_) {
    AE_ASSIGN(auto repo, OpenRepo(root_));
    local_ = std::make_unique<Server>(std::move(repo));
    // No daemon: nothing of ours runs in the live tree (FindSubvolumeUser
    // checks for anyone else's).
    local_->set_swap_restores(true);
    local_->repo().set_progress(progress_);
  }
  return local_.get();
}

void Client::set_progress(Progress* p) {
  progress_ = p;
  if (local_) local_->repo().set_progress(p);
}

Result<std::optional<json>> Client::AskDaemon(std::string_view op, const json& args, const CallContext& call) {
  std::string path = snap::layout::Socket(root_);
  std::span<const int> fds;
  if (call.stdio) fds = *call.stdio;
  // Who asked travels along: this process's caller, or the command line.
  const snap::Requester who = WhoAsked(call);
  json who_json = {{"origin", snap::OriginName(who.origin)}};
  if (!who.client.empty()) who_json["client"] = who.client;
  if (!who.session.empty()) who_json["session"] = who.session;
  Result<json> resp = CallDaemonStream(path, std::string(op), args, [&](const json& frame) {
    return !call.emit || call.emit(frame);  // false: the caller cancelled (MCP), the daemon stops the request
  }, fds, who_json);
  if (!resp) {
    // Connect reports kNotFound for nobody listening and kInvalid for an
    // unusable path; anything else happened after a daemon answered.
    if (resp.error().code == ErrorCode::kNotFound || resp.error().code == ErrorCode::kInvalid)
      return std::optional<json>();
    return Unexpected<Error>(resp.error());
  }
  if (!resp->value("ok", false)) return Unexpected<Error>(ErrorFromJson((*resp)["error"]));
  return std::optional<json>((*resp)["result"]);
}

Result<json> Client::CallJson(std::string_view op, const json& args, const CallContext& call) {
  AE_ASSIGN(std::optional<json> resp, AskDaemon(op, args, call));
  if (resp) return std::move(*resp);
  AE_ASSIGN(Server* s, Local());
  CallContext here = call;
  here.who = WhoAsked(call);
  return control::CallJson(*s, op, args, here);
}

snap::Requester WhoAsked(const CallContext& call) {
  if (call.who.origin != snap::Origin::kUnknown) return call.who;
  return {snap::Origin::kCli, "", ""};
}

}  // namespace agentenv::control
