#include "control/daemon_call.h"

#include <poll.h>
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

bool SendWithFds(int fd, const std::string& s, std::span<const int> fds) {
  if (fds.empty()) return SendAll(fd, s);
  if (fds.size() > kMaxPassedFds || s.empty()) {
    errno = EINVAL;
    return false;
  }
  // The descriptors ride on the first byte; the rest of the line follows.
  struct iovec iov {const_cast<char*>(s.data()), 1};
  alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t n;
  do n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == 1 && SendAll(fd, s.substr(1));
}

Result<nlohmann::json> CallDaemon(const std::string& path, const std::string& op, const nlohmann::json& args) {
  return CallDaemonStream(path, op, args, [](const nlohmann::json&) { return true; });
}

Result<nlohmann::json> CallDaemonStream(const std::string& path, const std::string& op, const nlohmann::json& args,
                                        const std::function<bool(const nlohmann::json&)>& on_frame,
                                        std::span<const int> fds, const nlohmann::json& who) {
  AE_ASSIGN(UniqueFd fd, ConnectSocket(path));
  nlohmann::json request = {{"id", 1}, {"op", op}, {"args", args}};
  if (!who.is_null()) request["who"] = who;
  if (!SendWithFds(fd.get(), request.dump() + "\n", fds)) return FailErrno(path, errno);
  std::string buf;
  char chunk[65536];
  bool cancelled = false;
  auto deliver = [&](const nlohmann::json& frame) {
    if (cancelled || on_frame(frame)) return;
    cancelled = true;  // the response (and the reply to cancel, id 2) still come
    SendAll(fd.get(), nlohmann::json{{"id", 2}, {"op", "cancel"}, {"args", {{"id", 1}}}}.dump() + "\n");
  };
  for (;;) {
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      auto msg = nlohmann::json::parse(buf.substr(0, nl), nullptr, false);
      buf.erase(0, nl + 1);
      if (msg.is_discarded() || !msg.is_object()) return Fail(ErrorCode::kCorrupt, path + ": malformed response");
      if (msg.value("id", nlohmann::json()) == 2) continue;  // the reply to our cancel
      if (!msg.contains("frame")) return msg;
      deliver(msg);
    }
    pollfd p{fd.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, 250);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      deliver(nullptr);
      continue;
    }
    ssize_t n = ::recv(fd.get(), chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(path, errno);
    if (n == 0) return Fail(path + ": daemon closed the connection");
    buf.append(chunk, n);
  }
}

}  // namespace agentenv::control
