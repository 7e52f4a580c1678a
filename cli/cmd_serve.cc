// agentenv serve: the daemon plus MCP over Streamable HTTP and the web DVR on --listen HOST:PORT,
// for an agent host on another machine (RunDaemon in cmd_daemon.cc).
#include "cli/cli.h"
#include "cli/commands.h"

namespace agentenv::cli {

int CmdServe(int argc, char** argv) {
  return RunDaemon(argc, argv, "serve",
                   "The daemon (automatic capture, the control socket) plus MCP over Streamable HTTP with "
                   "--listen HOST:PORT, for an agent host on another machine: POST http://HOST:PORT/mcp (DELETE ends a "
                   "session), Mcp-Session-Id, a bearer token for any non-loopback bind; and the web DVR, a browser UI for "
                   "the history, at http://HOST:PORT/ (its URL with the action token is logged at start). One "
                   "process serves them all");
}

}  // namespace agentenv::cli
