// Start-up of a long-running server process (daemon, supervise, shell),
// written once, in this order:
//   1. block the signals it waits for, before any thread starts, so that no
//      other thread receives them (they are read from a signalfd);
//   2. bind its sockets: the first refuses with kBusy when another daemon
//      already serves this root;
//   3. take the repository lock for good: from now on every writer of the
//      repository runs in this process;
//   4. start the automatic capture (a baseline snapshot first);
//   5. start the HTTP listener, when asked for (MCP on /mcp, tool calls run
//      on this process's server), and serve the sockets. Clients that
//      connected since step 2 waited in the backlog: no operation runs
//      while the server is still being set up (Server::StartCapture
//      publishes the capture unlocked).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "control/server.h"
#include "serve/grants.h"
#include "serve/http.h"
#include "serve/mcp_http.h"
#include "serve/socket.h"

namespace agentenv::serve {

struct ServeOptions {
  std::vector<int> signals;                                  // e.g. SIGINT, SIGTERM
  std::vector<std::pair<std::string, StreamHandler>> sockets;  // path, handler
  std::optional<capture::CaptureOptions> capture;                     // none: no automatic snapshots
  std::optional<HttpOptions> http;                                     // none: no HTTP listener
  std::vector<HttpRoutes> http_routes;                                 // served beside /mcp
};

class Serving {
 public:
  // Sets up `server` as above. Errors: kBusy (another daemon or lock
  // holder), I/O, a bad ignore file.
  static Result<std::unique_ptr<Serving>> Start(control::Server& server, ServeOptions opt);
  // Step 1 alone: the signals, no sockets, no lock, no capture.
  static Result<std::unique_ptr<Serving>> Signals(control::Server& server, const std::vector<int>& signals);
  ~Serving();

  // The HTTP listener; null when none was asked for.
  const HttpServer* http() const { return http_.get(); }
  // Who the listener's tokens are (serve/grants.h); null without a listener.
  const Grants* grants() const { return grants_.get(); }
  // Readable when one of the signals arrived (read a signalfd_siginfo).
  int signal_fd() const { return signals_.get(); }
  // Blocks until one of the signals arrives; returns its number.
  int WaitSignal();
  // Stops the capture (with deliver_pending its last changes become a
  // node), then the sockets. Idempotent.
  void Stop(bool deliver_pending);

 private:
  explicit Serving(control::Server& server) : server_(server) {}
  control::Server& server_;
  UniqueFd signals_;
  std::vector<std::unique_ptr<SocketServer>> sockets_;
  std::unique_ptr<Grants> grants_;
  // The endpoint outlives the listener that calls it.
  std::unique_ptr<McpHttpEndpoint> mcp_http_;
  std::unique_ptr<HttpServer> http_;
  bool stopped_ = false;
};

}  // namespace agentenv::serve
