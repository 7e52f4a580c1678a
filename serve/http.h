// The HTTP listener of `agentenv serve --listen HOST:PORT`: one listener,
// route sets registered on it (MCP's /mcp, the web DVR), and the guard
// every request passes first (serve/http_head.h: one Host header, naming a
// loopback host on a loopback bind; a loopback or allowed Origin; the
// bearer token when one is set, as it must be for a bind that is not
// loopback). A refused request reaches no route: it does nothing.
//
// Hostile clients cost bounded time and memory, not threads. One thread
// (an epoll loop) accepts, reads every request's head (and a small body)
// under one deadline for the whole head, keeps idle kept-alive
// connections, and answers refusals itself; only a request whole and past
// the guard gets a thread, which parses and routes it with cpp-httplib and
// hands the connection back after the reply. So a client that sends a
// byte a second, or never a byte, holds a socket and at most 80 KiB until
// its deadline, and no thread at any time; connections are capped in all
// and per peer address, and at either cap the oldest connection that is
// not being served (idle, or still sending its head) of the peer with the
// most is closed for the new one. Requests run on two capped sets of
// threads: long-lived ones (event streams, MCP replies that wait for a
// command; route sets name them) on theirs, refused with 503 past its
// cap, so they never take the threads short requests run on.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/result.h"

namespace httplib {
class Server;
}

namespace agentenv::serve {

struct HttpLimits {
  // From a request's first byte (a new connection's accept) until its head,
  // and its body when that is at most kFrontBodyBytes, are in. nginx's
  // client_header_timeout: one deadline, not one per read.
  std::chrono::milliseconds head_timeout{10000};
  // A kept-alive connection waits this long for its next request.
  std::chrono::milliseconds idle_timeout{60000};
  // A larger or chunked body, read by the request's thread.
  std::chrono::milliseconds body_timeout{60000};
  // A reply's write to a client that does not read ends after this.
  std::chrono::milliseconds write_timeout{10000};
  size_t max_connections = 512;
  size_t max_per_peer = 128;
  size_t max_short = 32;  // requests served at once that are not long-lived (more wait for a thread)
  size_t max_long = 64;   // long-lived requests at once (more get 503)
};

// A body up to this size is read before the request gets a thread.
inline constexpr size_t kFrontBodyBytes = 64 << 10;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                              // 0: a free port (see HttpServer::port)
  std::string token;                         // empty: none required (loopback binds only)
  std::vector<std::string> allowed_origins;  // e.g. "https://ui.example.com", beyond the loopback ones
  // Tokens besides `token` (scoped ones, serve/grants.h): the guard's
  // status for an Authorization header on a path; 0 passes. Empty: none.
  std::function<int(std::string_view authorization, std::string_view path)> scoped_tokens;
  HttpLimits limits;
};

// A set of routes: `install` registers them on the router, once, before
// the listener serves; `long_lived` names the requests among them that
// may hold their thread long (method, percent-decoded path).
struct HttpRoutes {
  std::function<void(httplib::Server&)> install;
  std::function<bool(std::string_view method, std::string_view path)> long_lived;
  // Requests among them any client may make without the token (a page and
  // its scripts, which hold no data); absent: none. Host and Origin are
  // checked still.
  std::function<bool(std::string_view method, std::string_view path)> open;
  // The token the session named by a Cookie header was made from, "" for
  // none (unknown, forged, expired): a request carrying it is let through
  // as if it bore that token. Called on the listener's thread: quick, thread-safe.
  std::function<std::string(const std::string& cookie)> session_token;
};

class HttpServer {
 public:
  // Binds (never sharing the port: a second listener on it is refused),
  // registers `routes`, and serves on its own threads. Errors: kInvalid (a
  // non-loopback host without a token, a host that is not this machine's),
  // kBusy (the port is in use), I/O.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpOptions& opt, const std::vector<HttpRoutes>& routes);
  ~HttpServer();
  // Stops accepting, ends the connections (a reply being written stops,
  // an event stream ends) and waits for the requests' threads. Idempotent.
  void Stop();
  int port() const { return port_; }
  // http://HOST:PORT
  std::string base_url() const;

 private:
  class Loop;
  HttpServer() = default;
  HttpOptions opt_;
  int port_ = 0;
  std::unique_ptr<Loop> loop_;
};

// Called from a route's handler: whether the client of the request this
// thread serves is still connected (it has not closed or shut its side,
// and the listener is not stopping). True outside a request.
bool RequestClientConnected();

// Whether `host` (a name or an address, IPv6 with or without brackets)
// is a loopback one: localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(const std::string& host);
// Whether the Authorization header value `authorization` is "Bearer
// <token>" (the scheme in any case, RFC 9110), the token compared in
// constant time (a wrong guess does not tell how much of it matched).
// False for an empty token.
bool BearerMatches(const std::string& authorization, const std::string& token);
// Splits "HOST:PORT" ("[::1]:8080" for IPv6). Errors: kInvalid.
Result<std::pair<std::string, int>> ParseListen(const std::string& spec);
// The token in the file at `path`, or a new random one written there
// (mode 0600, durably) when the file does not exist. Errors: I/O, kInvalid
// (an empty or unreadable token file).
Result<std::string> LoadOrCreateToken(const std::string& path);

}  // namespace agentenv::serve
