// MCP over Streamable HTTP (protocol 2025-06-18 and later) on one
// endpoint of the HTTP listener (serve/http.h), default /mcp:
//   POST  one JSON-RPC message. initialize without a session makes one and
//         returns its id in Mcp-Session-Id; every later POST carries it
//         (400 without, 404 for an unknown or ended one). A notification or
//         a response gets 202. A request gets application/json when its
//         reply is its only message, else text/event-stream: its progress
//         and log notifications, then the reply, then the stream ends.
//   GET   405: no stream for messages outside a request.
//   DELETE ends the session (its requests in flight are cancelled).
// Sessions are McpSession (serve/mcp_session.h): requests of one session
// run concurrently, each on its own POST. At most kMaxSessions live; past
// that the least recently used idle one is ended.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "serve/http.h"
#include "serve/mcp_session.h"

namespace agentenv::serve {

inline constexpr size_t kMaxSessions = 128;

class McpHttpEndpoint {
 public:
  McpHttpEndpoint(ToolRunner run, FileReader read, McpOptions opt = {});
  // Stop() first.
  ~McpHttpEndpoint();
  // The routes to register on the listener: POST, GET and DELETE `path`;
  // its POSTs are long-lived (a reply may wait for a long command). The
  // endpoint must outlive the listener.
  HttpRoutes Routes(const std::string& path = "/mcp");
  // Cancels every request in flight and ends every open stream, so the
  // listener can stop without waiting for long commands. Idempotent.
  void Stop();
  size_t sessions() const;

 private:
  struct Entry {
    std::shared_ptr<McpSession> mcp;
    std::chrono::steady_clock::time_point used;
  };
  std::shared_ptr<McpSession> NewSession(std::string* id);
  std::shared_ptr<McpSession> FindSession(const std::string& id);

  ToolRunner run_;
  FileReader read_;
  McpOptions opt_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;  // guards sessions_
  std::map<std::string, Entry> sessions_;
};

}  // namespace agentenv::serve
