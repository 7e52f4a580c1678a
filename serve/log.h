// The log of a long-running server (daemon, serve, supervise, shell): one
// line on stderr per event, with a timestamp. The only printing below cli/.
#pragma once

#include <string>

namespace agentenv::serve {

// Writes "<local time> agentenv: <line>" to stderr in one write.
// Thread-safe.
void Log(const std::string& line);

}  // namespace agentenv::serve
