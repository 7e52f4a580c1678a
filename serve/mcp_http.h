// MCP over Streamable HTTP (protocol 2025-06-18 and later) on one
// endpoint of the HTTP listener (serve/http.h), default /mcp:
//   POST  one JSON-RPC message. initialize without a session makes one and
//         returns its id in Mcp-Session-Id; every later POST carries it
//         (400 without; 404 for an unknown one, or one that ended: the
//         error says which). A notification or a response gets 202. A
//         request gets application/json when its reply is its only
//         message, else text/event-stream: its progress and log
//         notifications, then the reply, then the stream ends.
//   GET   405: no stream for messages outside a request.
//   DELETE ends the session (its requests in flight are cancelled); 400
//         without a session id.
// An MCP-Protocol-Version header, when sent, must name a version this
// server answers (400 otherwise); without one the negotiated version holds.
//
// Sessions are McpSession (serve/mcp_session.h): requests of one session
// run concurrently, each on its own POST. Sessions are bounded in number,
// in all and per peer address, and a session idle (no request in flight)
// for idle_ttl ends. A live session is never ended to make room: past a
// bound, initialize is refused (503) with the reason, and the caller ends
// one of its sessions (DELETE) or waits for an idle one to expire.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "serve/http.h"
#include "serve/mcp_session.h"

namespace agentenv::serve {

struct McpHttpOptions {
  size_t max_sessions = 128;
  size_t max_sessions_per_peer = 32;
  std::chrono::milliseconds idle_ttl = std::chrono::minutes(30);
  McpOptions session;
  // Whether environment `env` (a workspace's name) exists: a workspace
  // endpoint of one that does not is 404. Empty: every name is taken.
  std::function<Result<void>(const std::string& env)> check_environment;
  // The grant of a request's Authorization header (serve/grants.h), or
  // nullopt (401). Empty: every request is the operator's.
  std::function<std::optional<Grant>(std::string_view authorization)> authorize;
  // The clock idle times are read from; empty: steady_clock (tests set
  // one they move by hand, so expiry is tested without waiting for it).
  std::function<std::chrono::steady_clock::time_point()> now;
};

class McpHttpEndpoint {
 public:
  McpHttpEndpoint(ToolRunner run, FileReader read, McpHttpOptions opt = {});
  // Stop() first.
  ~McpHttpEndpoint();
  // The routes to register on the listener: POST, GET and DELETE `path`
  // (the live tree's) and every workspace's /w/NAME/mcp
  // (serve/environments.h), whose sessions' tools act on workspace NAME; a
  // session is answered on the endpoint that made it only. POSTs are
  // long-lived (a reply may wait for a long command). The endpoint must
  // outlive the listener.
  HttpRoutes Routes(const std::string& path = "/mcp");
  // Cancels every request in flight and ends every open stream, so the
  // listener can stop without waiting for long commands. Idempotent.
  void Stop();
  size_t sessions();

 private:
  struct Entry {
    std::shared_ptr<McpSession> mcp;
    std::string peer;
    std::string env;       // "" the live tree, else a workspace
    std::string token_id;  // the scoped token that made it; "" the operator
    std::chrono::steady_clock::time_point used;
  };
  // A new session for `peer`, or null with *why set (a bound is reached).
  std::shared_ptr<McpSession> NewSession(const std::string& peer, const std::string& env, const Grant& grant,
                                         std::string* id, std::string* why);
  // The session `id` of environment `env` made with `grant`'s token, or
  // null with *why saying whether it is unknown (also: another endpoint's
  // or another token's) or how it ended.
  std::shared_ptr<McpSession> FindSession(const std::string& id, const std::string& env, const Grant& grant,
                                          std::string* why);
  // Ends `id` (DELETE); false with *why as FindSession.
  bool EndSession(const std::string& id, const std::string& env, const Grant& grant, std::string* why);
  // Ends the sessions idle past idle_ttl; they are cancelled by the
  // caller, outside the lock (cancelling waits for nothing, but may call
  // into a stream).
  void Expire(std::chrono::steady_clock::time_point now, std::vector<std::shared_ptr<McpSession>>* ended)
      REQUIRES(mu_);
  void RememberEnded(const std::string& id, const std::string& how) REQUIRES(mu_);
  std::string Unknown(const std::string& id) REQUIRES(mu_);

  ToolRunner run_;
  FileReader read_;
  McpHttpOptions opt_;
  std::atomic<bool> stopping_{false};
  Mutex mu_;
  std::map<std::string, Entry> sessions_ GUARDED_BY(mu_);
  // Ids of sessions that ended and how, the newest kRememberEnded, so a
  // client is told that its session ended rather than that it never was.
  std::map<std::string, std::string> ended_ GUARDED_BY(mu_);
  std::deque<std::string> ended_order_ GUARDED_BY(mu_);
};

}  // namespace agentenv::serve
