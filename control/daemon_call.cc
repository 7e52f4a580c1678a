#include "control/daemon_call.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace agentenv::control {

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    return Fail(ErrorCode::kInvalid, path + ": socket path too long (max " + std::to_string(sizeof a.sun_path - 1) + " bytes); use a shorter --root");
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

Result<UniqueFd> ConnectSocket(const std::string& path) {
  AE_ASSIGN(sockaddr_un a, SocketAddress(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return FailErrno(path, errno);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int e = errno;
    if (e == ENOENT || e == ECONNREFUSED) return Fail(ErrorCode::kNotFound, path + ": no daemon is running (start one with `agentenv daemon`)");
    return FailErrno(path, e);
  }
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += n;
  }
  return true;
}

Result<nlohmann::json> CallDaemon(const std::string& path, const std::string& op, const nlohmann::json& args) {
  return CallDaemonStream(path, op, args, [](const nlohmann::json&) {});
}

Result<nlohmann::json> CallDaemonStream(const std::string& path, const std::string& op, const nlohmann::json& args,
                                        const std::function<void(const nlohmann::json&)>& on_frame) {
  AE_ASSIGN(UniqueFd fd, ConnectSocket(path));
  if (!SendAll(fd.get(), nlohmann::json{{"id", 1}, {"op", op}, {"args", args}}.dump() + "\n")) return FailErrno(path, errno);
  std::string buf;
  char chunk[65536];
  for (;;) {
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      auto msg = nlohmann::json::parse(buf.substr(0, nl), nullptr, false);
      buf.erase(0, nl + 1);
      if (msg.is_discarded() || !msg.is_object()) return Fail(ErrorCode::kCorrupt, path + ": malformed response");
      if (!msg.contains("frame")) return msg;
      on_frame(msg);
    }
    ssize_t n = ::recv(fd.get(), chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(path, errno);
    if (n == 0) return Fail(path + ": daemon closed the connection");
    buf.append(chunk, n);
  }
}

}  // namespace agentenv::control
