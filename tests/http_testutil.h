// A raw HTTP/1.1 client for the listener's tests: connections from a
// chosen loopback source address (127.0.0.0/8 is all loopback, so each
// address is a peer of its own), bytes sent as given (slow clients, two
// Host headers), and one response read with a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>

#include "common/unique_fd.h"

namespace agentenv::test {

// A connection to 127.0.0.1:port from `from` (any port), TCP_NODELAY set;
// invalid when the connection fails.
inline UniqueFd ConnectFrom(int port, const char* from = "127.0.0.1") {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &src.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return UniqueFd();
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(uint16_t(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) return UniqueFd();
  return fd;
}

inline bool SendAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(size_t(n));
  }
  return true;
}

// A GET of `path` with one Host header and, when given, the token.
inline std::string GetRequest(const std::string& path, const std::string& token = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
         (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") + "\r\n";
}

struct RawResponse {
  int status = -1;  // -1: none within the time (or the connection ended first)
  std::string head, body;
};

// Reads one response with a Content-Length body (or, without one, the
// head alone) within `timeout_ms`, and nothing past it: a pipelined
// response after it stays for the next call. Interim (1xx) ones are skipped.
inline RawResponse ReadResponse(int fd, int timeout_ms) {
  RawResponse r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // Up to `n` bytes into `out`; false when the time is up or the connection ended.
  auto read = [&](std::string& out, size_t n) {
    while (n > 0) {
      int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      pollfd p{fd, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, left) <= 0) return false;
      char buf[16384];
      ssize_t got = ::recv(fd, buf, std::min(n, sizeof buf), 0);
      if (got <= 0) return false;
      out.append(buf, size_t(got));
      n -= size_t(got);
    }
    return true;
  };
  for (;;) {
    std::string head;
    while (!head.ends_with("\r\n\r\n"))
      if (!read(head, 1)) return r;
    const int status = std::atoi(head.c_str() + 9);
    if (status == 100) continue;
    size_t cl = head.find("Content-Length: ");
    std::string body;
    if (cl != std::string::npos && !read(body, std::stoul(head.substr(cl + 16)))) return r;
    r.status = status;
    r.head = std::move(head);
    r.body = std::move(body);
    return r;
  }
}

// Whether the server closed `fd` (EOF or reset) within `timeout_ms` (0:
// by now); bytes it sent first are read and skipped.
inline bool ClosedWithin(int fd, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, std::max(left, 0)) <= 0) return false;
    char buf[65536];
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
}

}  // namespace agentenv::test
