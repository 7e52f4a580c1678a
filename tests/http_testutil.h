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
// head and whatever came with it) within `timeout_ms`.
inline RawResponse ReadResponse(int fd, int timeout_ms) {
  RawResponse r;
  std::string in;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t need = std::string::npos, head_end = std::string::npos;
  for (;;) {
    if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
      r.head = in.substr(0, head_end + 4);
      r.status = std::atoi(r.head.c_str() + 9);
      size_t cl = r.head.find("Content-Length: ");
      need = cl == std::string::npos ? head_end + 4 : head_end + 4 + std::stoul(r.head.substr(cl + 16));
      if (r.status == 100) {  // an interim response: the real one follows
        in.erase(0, head_end + 4);
        head_end = std::string::npos;
        r.status = -1;
        continue;
      }
    }
    if (need != std::string::npos && in.size() >= need) {
      r.body = in.substr(head_end + 4, need - head_end - 4);
      return r;
    }
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, left) <= 0) break;
    char buf[16384];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, size_t(n));
  }
  if (need == std::string::npos) r.status = -1;
  return r;
}

// Whether the server closed `fd` (EOF or reset) within `timeout_ms` (0:
// by now); bytes it sent first are read and skipped.
inline bool ClosedWithin(int fd, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, std::max(left, 0)) <= 0) return false;
    char buf[4096];
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
}

}  // namespace agentenv::test
