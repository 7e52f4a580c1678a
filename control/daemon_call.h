// The client side of the daemon's control socket (serve/socket.h has the
// protocol and the server): addressing, the request size limit both sides
// keep, and one call. Thread-safe: every call has its own connection.
#pragma once

#include <sys/un.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace agentenv::control {

// The longest request line the socket and `agentenv mcp` accept. A longer
// one gets an error reply (the socket then closes that connection; MCP
// skips the line) and memory stays bounded.
inline constexpr size_t kMaxRequestBytes = size_t{16} << 20;

// The address of the unix socket at `path`. Errors: kInvalid when the
// path is longer than a socket address holds (with the remedy).
Result<sockaddr_un> SocketAddress(const std::string& path);
// A connection to the socket at `path`. Errors: kNotFound when no daemon
// listens there, kInvalid (path), I/O.
Result<UniqueFd> ConnectSocket(const std::string& path);
// Writes all of `s` (no SIGPIPE); false when the peer is gone.
bool SendAll(int fd, const std::string& s);

// Sends one request to the daemon at `path` and returns its response
// object. Errors: kNotFound when no daemon listens there, I/O.
Result<nlohmann::json> CallDaemon(const std::string& path, const std::string& op, const nlohmann::json& args);

// Same, handing every frame that precedes the response to on_frame (e.g.
// exec's output as it is produced). Errors as for CallDaemon.
Result<nlohmann::json> CallDaemonStream(const std::string& path, const std::string& op, const nlohmann::json& args,
                                        const std::function<void(const nlohmann::json&)>& on_frame);

}  // namespace agentenv::control
