#include "control/client.h"

#include "control/disk_quota.h"
#include "control/errors.h"
#include "control/ignore.h"
#include "control/jobs.h"
#include "control/workspace.h"
#include "control/daemon_call.h"
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

Result<std::optional<json>> Client::AskDaemon(std::string_view op, const json& args, const FrameSink& emit) {
  std::string path = snap::layout::Socket(root_);
  Result<json> resp = CallDaemonStream(path, std::string(op), args, [&](const json& frame) {
    return !emit || emit(frame);  // false: the caller cancelled (MCP), the daemon stops the request
  });
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

Result<json> Client::CallJson(std::string_view op, const json& args, const FrameSink& emit) {
  AE_ASSIGN(std::optional<json> resp, AskDaemon(op, args, emit));
  if (resp) return std::move(*resp);
  AE_ASSIGN(Server* s, Local());
  return control::CallJson(*s, op, args, emit);
}

Result<TerminalExecReply> ExecOnTerminal(Client& client, const TerminalExecRequest& r) {
  AE_ASSIGN(Server* local, client.Local());
  runner::EnvSpec spec;
  spec.root = local->repo().work_dir();
  std::optional<WorkspaceInUse> in_ws;
  if (!r.workspace.empty()) {
    AE_ASSIGN(in_ws, UseWorkspace(local->repo(), r.workspace));
    in_ws->Apply(&spec);
  }
  AE_ASSIGN(uint64_t disk_bytes, DiskBytesFor(local->repo().root(), r.disk_bytes, in_ws ? in_ws->ws.disk_bytes : 0));
  AE_ASSIGN(DiskLimit limit, DiskLimit::Plan(local->repo(), &spec, disk_bytes));
  spec.tied_to_caller = true;
  spec.argv = r.argv;
  spec.cwd = r.cwd;
  AE_ASSIGN(spec.network, ParseNetwork(r.network));
  spec.stdio = r.capture ? runner::Stdio::kCapture : runner::Stdio::kInherit;
  AE_ASSIGN(spec.limits.timeout, RunTimeout(r.timeout_s, "--timeout"));
  Result<runner::RunResult> ran = runner::Run(spec);
  TerminalExecReply rep;
  if (!ran && ran.error().code == ErrorCode::kNotFound) {
    rep.exit_code = 127;  // as a shell says it; nothing ran, nothing to snapshot
    rep.error = ran.error().message;
    return rep;
  }
  if (!ran) return Unexpected<Error>(ran.error());
  const runner::RunResult& run = *ran;
  if (auto kept = limit.Keep(run.disk ? run.disk->get() : -1); !kept)
    return Wrap("the command ran but its changes could not all be kept", kept.error());
  if (in_ws) in_ws->lock.reset();  // the snapshot takes it again
  rep.exit_code = run.exit_code;
  rep.signal = run.signal;
  rep.timed_out = run.timed_out;
  if (r.capture) {
    rep.stdout_text = run.out;
    rep.stderr_text = run.err;
  }
  if (!r.snapshot) return rep;
  std::string line;
  for (const auto& a : r.argv) line += (line.empty() ? "" : " ") + a;
  SnapshotRequest snap;
  snap.label = "exec: " + line.substr(0, 180);
  snap.workspace = r.workspace;
  AE_ASSIGN(SnapshotReply s, client.Call(snap));
  if (s.node) rep.node = s.node->id;
  rep.label = snap.label;
  return rep;
}

}  // namespace agentenv::control
