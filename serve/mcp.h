// The MCP adapter: a Model Context Protocol server (JSON-RPC 2.0, one
// message per line) whose tools are the control operations (control/ops.h).
#pragma once

#include <iosfwd>
#include <string>

namespace agentenv::serve {

// Serves MCP on `in`/`out` until `in` ends. Tool calls run at the daemon
// serving `root` when one answers, else in this process. A root that is
// not a repository still answers initialize and tools/list; its tool calls
// fail with a clear error.
void ServeMcp(const std::string& root, std::istream& in, std::ostream& out);

}  // namespace agentenv::serve
