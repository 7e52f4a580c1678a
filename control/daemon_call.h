// The client side of the daemon's control socket (serve/socket.h has the
// protocol and the server): addressing, the request size limit both sides
// keep, and one call. Thread-safe: every call has its own connection.
#pragma once

#include <sys/un.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <span>
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

// The most descriptors one request may carry (exec's stdin, stdout, stderr).
inline constexpr size_t kMaxPassedFds = 3;
// Like SendAll, with `fds` (at most kMaxPassedFds) passed along with the
// first byte of `s` (SCM_RIGHTS): the socket gives them to the request
// whose line that byte starts. False with errno on failure.
bool SendWithFds(int fd, const std::string& s, std::span<const int> fds);

// Sends one request to the daemon at `path` and returns its response
// object. Errors: kNotFound when no daemon listens there, I/O.
Result<nlohmann::json> CallDaemon(const std::string& path, const std::string& op, const nlohmann::json& args);

// Same, handing every frame that precedes the response to on_frame (e.g.
// exec's output as it is produced), and a null frame every 250 ms while
// none comes. When on_frame answers false the request is cancelled at the
// daemon (the socket's `cancel` op: an exec's command is killed) and its
// response is still awaited and returned. `fds` go with the request (exec:
// the command's stdin, stdout and stderr). Errors as for CallDaemon.
// `who` ({"origin","client","session"}), when not null, says who asked (the
// CLI, an MCP client the caller serves): recorded in what the op makes.
Result<nlohmann::json> CallDaemonStream(const std::string& path, const std::string& op, const nlohmann::json& args,
                                        const std::function<bool(const nlohmann::json&)>& on_frame,
                                        std::span<const int> fds = {}, const nlohmann::json& who = nullptr);

}  // namespace agentenv::control
