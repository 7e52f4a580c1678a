// The HTTP listener of `agentenv serve --listen HOST:PORT` (cpp-httplib):
// one listener, route sets registered on it (MCP's /mcp today, others
// later), and the guard every request passes first:
//   - on a loopback bind, Host must name a loopback address (DNS
//     rebinding: a page whose name resolves to 127.0.0.1 is refused);
//   - an Origin header, when sent, must be a loopback origin or one given
//     with --allow-origin (403 otherwise);
//   - with a token (required for a bind that is not loopback), every
//     request carries "Authorization: Bearer <token>" (401 otherwise).
// A refused request reaches no route: it does nothing.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"

namespace httplib {
class Server;
}

namespace agentenv::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                              // 0: a free port (see HttpServer::port)
  std::string token;                         // empty: none required (loopback binds only)
  std::vector<std::string> allowed_origins;  // e.g. "https://ui.example.com", beyond the loopback ones
  int threads = 64;                          // requests served at once (an SSE stream holds one)
};

// Registers routes on the listener; called once, before it serves.
using HttpRoutes = std::function<void(httplib::Server&)>;

class HttpServer {
 public:
  // Binds, registers the guard then `routes`, and serves on its own
  // threads. Errors: kInvalid (a non-loopback host without a token, a bad
  // host), kBusy (the port is taken), I/O.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpOptions& opt, const std::vector<HttpRoutes>& routes);
  ~HttpServer();
  // Stops accepting and waits for the listener thread. Idempotent.
  void Stop();
  int port() const { return port_; }
  // http://HOST:PORT
  std::string base_url() const;

 private:
  HttpServer() = default;
  HttpOptions opt_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
};

// Whether `host` (a name or an address, IPv6 with or without brackets)
// is a loopback one: localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(const std::string& host);
// Whether the Authorization header value `authorization` is "Bearer
// <token>", compared in constant time (a wrong guess does not tell how
// much of it matched). False for an empty token.
bool BearerMatches(const std::string& authorization, const std::string& token);
// Splits "HOST:PORT" ("[::1]:8080" for IPv6). Errors: kInvalid.
Result<std::pair<std::string, int>> ParseListen(const std::string& spec);
// The token in the file at `path`, or a new random one written there
// (mode 0600, durably) when the file does not exist. Errors: I/O, kInvalid
// (an empty or unreadable token file).
Result<std::string> LoadOrCreateToken(const std::string& path);

}  // namespace agentenv::serve
