// control::Client: how a command reaches an operation.
//
// A running daemon (or supervisor) holds the repository lock for its whole
// life and serves every writer itself. A request that needs the lock
// (Op<Req>::Locks) therefore goes to the daemon on <root>/agentenv.sock
// when one answers there, and runs here otherwise; readers (log, show,
// ...) always run here: they never wait for the lock. Either way the
// caller gets the same typed reply.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "control/ops.h"
#include "control/server.h"

namespace agentenv::control {

// Who a call says asked; the command line (Origin::kCli) when it says no one.
snap::Requester WhoAsked(const CallContext& call);

class Client {
 public:
  explicit Client(std::string root);
  ~Client();

  const std::string& root() const { return root_; }

  // Runs `req` where it must run (see above). Frames of a streaming request
  // go to `call.emit`; its descriptors go along to the daemon. Errors: the
  // operation's own; I/O or kCorrupt when a daemon answered but the
  // exchange failed.
  template <class Req>
  Result<typename Op<Req>::Reply> Call(const Req& req, const CallContext& call = {}) {
    using Reply = typename Op<Req>::Reply;
    if (Op<Req>::Locks(req)) {
      AE_ASSIGN(std::optional<json> resp, AskDaemon(Op<Req>::kName, ToJson(req), call));
      if (resp) return ReadReply<Reply>(Op<Req>::kName, *resp);
    }
    AE_ASSIGN(Server* s, Local());
    CallContext here = call;
    here.who = WhoAsked(call);
    return Op<Req>::Run(*s, req, here);
  }

  // Any operation by name with JSON arguments (MCP): at the daemon when one
  // answers, else here. Errors as for CallJson.
  Result<json> CallJson(std::string_view op, const json& args, const CallContext& call = {});

  // The repository opened in this process (on first use; thread-safe: a
  // concurrent first use opens it once). Errors: as OpenRepo.
  Result<Server*> Local();
  // Counters that operations run here advance (a daemon's work shows none).
  // Not owned; null: none.
  void set_progress(Progress* p);
  Progress* progress() const { return progress_; }

  // The result of `op` at the daemon serving `root`; nullopt when none
  // listens there (no socket, a dead daemon's socket, a path too long to
  // bind). Errors: the daemon's error reply; I/O after a daemon answered.
  Result<std::optional<json>> AskDaemon(std::string_view op, const json& args, const CallContext& call = {});

 private:
  std::string root_;
  std::mutex local_mu_;  // guards the opening of local_
  std::unique_ptr<Server> local_;
  Progress* progress_ = nullptr;
};

}  // namespace agentenv::control
