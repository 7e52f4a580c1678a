// The MCP adapter over stdio: a Model Context Protocol server (JSON-RPC
// 2.0, one message per line) whose tools are the control operations
// (control/ops.h); the session itself is serve/mcp_session.h.
#pragma once

#include <iosfwd>
#include <string>

#include "control/client.h"
#include "serve/mcp_session.h"

namespace agentenv::serve {

// Serves MCP on `in`/`out` until `in` ends, then waits for the requests
// still in flight. Messages are read on this thread; tool calls run on
// their own (a ping is answered while an exec runs); every line written to
// `out` is written whole under one mutex. Tool calls run at the daemon
// serving `root` when one answers, else in this process. A root that is
// not a repository still answers initialize and tools/list; its tool calls
// fail with a clear error.
void ServeMcp(const std::string& root, std::istream& in, std::ostream& out);

// The tool runner of a session whose operations go through `client` (at
// the daemon when one serves its root; its file reader is
// NodeFileReader(client)). `client` must outlive the session.
ToolRunner ClientToolRunner(control::Client& client);

}  // namespace agentenv::serve
