#include "serve/socket.h"

#include "control/daemon_call.h"
#include "control/errors.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace agentenv::serve {

using control::ConnectSocket;
using control::SendAll;
using control::SocketAddress;


Result<std::unique_ptr<SocketServer>> SocketServer::Listen(const std::string& path, StreamHandler handler) {
  if (ConnectSocket(path)) return Fail(ErrorCode::kBusy, path + ": another daemon is already serving this repository");
  ::unlink(path.c_str());  // stale socket of a dead daemon
  AE_ASSIGN(sockaddr_un a, SocketAddress(path));
  std::unique_ptr<SocketServer> s(new SocketServer);
  s->path_ = path;
  s->handler_ = std::move(handler);
  s->listen_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s->listen_) return FailErrno(path, errno);
  // Created 0600 from the start: no window where others could connect.
  mode_t old = ::umask(0177);
  int rc = ::bind(s->listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::umask(old);
  if (rc != 0 || ::listen(s->listen_.get(), 64) != 0) return FailErrno(path, errno);
  s->stop_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!s->stop_) return FailErrno("eventfd", errno);
  return s;
}

void SocketServer::Accept() {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

SocketServer::~SocketServer() { Stop(); }

void SocketServer::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  if (acceptor_.joinable()) acceptor_.join();
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return clients_ == 0; });
  ::unlink(path_.c_str());
}

void SocketServer::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listen_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    UniqueFd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) continue;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != ::geteuid() && cred.uid != 0)) {
      SendAll(c.get(), nlohmann::json{{"ok", false}, {"error", {{"code", "denied"}, {"message", "peer uid not allowed"}}}}.dump() + "\n");
      // Closing with the peer's request unread would send a reset, which
      // can discard the answer before the peer reads it: end our side,
      // then take what it sent (briefly) before closing.
      ::shutdown(c.get(), SHUT_WR);
      pollfd in{c.get(), POLLIN, 0};
      char sink[4096];
      while (::poll(&in, 1, 100) > 0 && ::recv(c.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
      }
      continue;
    }
    {
      std::lock_guard lock(mu_);
      ++clients_;
    }
    std::thread([this, fd = std::make_shared<UniqueFd>(std::move(c))]() mutable {
      Serve(std::move(*fd));
      std::lock_guard lock(mu_);
      if (--clients_ == 0) idle_.notify_all();
    }).detach();
  }
}

void SocketServer::Serve(UniqueFd client) {
  std::string buf;
  char chunk[65536];
  for (;;) {
    pollfd p[2] = {{client.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    ssize_t n = ::recv(client.get(), chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    size_t scanned = buf.size();  // no newline before here
    buf.append(chunk, n);
    size_t nl;
    while ((nl = buf.find('\n', scanned)) != std::string::npos) {
      scanned = 0;
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json resp;
      auto req = nlohmann::json::parse(line, nullptr, false);
      if (req.is_discarded() || !req.is_object() || !req.contains("op") || !req["op"].is_string()) {
        resp = {{"ok", false}, {"error", {{"code", "invalid"}, {"message", "expected one JSON object per line: {\"op\":\"log\",\"args\":{}}"}}}};
      } else {
        if (req.contains("id")) resp["id"] = req["id"];
        control::FrameSink emit = [&](nlohmann::json frame) {
          if (frame.is_null()) {
            pollfd p{client.get(), POLLRDHUP, 0};
            return ::poll(&p, 1, 0) == 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR));
          }
          if (req.contains("id")) frame["id"] = req["id"];
          return SendAll(client.get(), frame.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        };
        Result<nlohmann::json> r = handler_(req["op"].get<std::string>(), req.value("args", nlohmann::json::object()), emit);
        resp["ok"] = bool(r);
        if (r) resp["result"] = std::move(*r);
        else resp["error"] = control::ErrorJson(r.error());
      }
      if (!SendAll(client.get(), resp.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")) return;
    }
    if (buf.size() > control::kMaxRequestBytes) {
      nlohmann::json resp = {{"ok", false},
                             {"error", {{"code", "invalid"},
                                        {"message", "request line longer than 16 MiB (the socket's limit): "
                                                    "the connection is closed; send smaller requests"}}}};
      SendAll(client.get(), resp.dump() + "\n");
      return;
    }
  }
}

}  // namespace agentenv::serve
