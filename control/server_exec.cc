// The exec op on a Server: the command pipeline (run/pipeline.h) with this
// server's repository, writer mutex and jobs, its outcome as the reply.
#include "control/server.h"

namespace agentenv::control {

Result<ExecReply> Server::Exec(const ExecRequest& r, const CallContext& call) {
  run::Host host{*repo_, writer_mu_, jobs_, live_execs_, command_nice_};
  AE_ASSIGN(run::Outcome o, run::Exec(host, r, run::Streams{call.stdio, call.emit}, call.who, call.owner));
  ExecReply rep;
  rep.exit_code = o.exit_code;
  rep.signal = o.signal;
  rep.timed_out = o.timed_out;
  rep.oom_killed = o.oom_killed;
  rep.killed = o.killed;
  rep.duration_ms = o.duration_ms;
  rep.queued_ms = o.queued_ms;
  rep.job = o.job;
  rep.command = std::move(o.command);
  rep.stdout_text = std::move(o.stdout_text);
  rep.stderr_text = std::move(o.stderr_text);
  rep.stdout_truncated = o.stdout_truncated;
  rep.stderr_truncated = o.stderr_truncated;
  rep.stdout_bytes = o.stdout_bytes;
  rep.stderr_bytes = o.stderr_bytes;
  if (o.session) rep.session = SessionInfo{r.session, o.session->cwd, o.session->env};
  if (o.node) {
    AE_ASSIGN(snap::NodeRecord rec, repo_->Record(*o.node));
    rep.node = MakeNodeInfo(rec);
  }
  return rep;
}

}  // namespace agentenv::control
