// Loopback TCP helpers for tests: a free port, and a server that fails every
// request the same way (a registry that is down).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

namespace agentenv {

// A TCP socket bound to a free port on 127.0.0.1 (*port), not listening.
inline int BindLoopback(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

// A port on 127.0.0.1 nothing listens on right now.
inline int FreePort() {
  int port = 0;
  ::close(BindLoopback(&port));
  return port;
}

// A loopback HTTP server that answers every request with `status` and
// counts them: a registry failing the same way every time.
class FailingServer {
 public:
  explicit FailingServer(int status) : status_(status) {
    fd_ = BindLoopback(&port_);
    REQUIRE(::listen(fd_, 16) == 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FailingServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }

 private:
  void Serve() {
    for (;;) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, size_t(n));
      }
      ++requests_;
      std::string body = R"({"errors":[{"code":"UNAVAILABLE","message":"try later"}]})";
      std::string resp = "HTTP/1.1 " + std::to_string(status_) + " Failing\r\nContent-Type: application/json\r\n"
                         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      (void)!::write(c, resp.data(), resp.size());
      ::close(c);
    }
  }
  int status_, fd_ = -1, port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace agentenv
