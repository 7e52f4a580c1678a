// The HTTP listener: its socket, options and helpers (serve/http.h); the
// event loop is serve/http_loop.cc.
#include "serve/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "common/durable.h"
#include "common/random.h"
#include "common/unique_fd.h"
#include "serve/http_loop.h"

namespace agentenv::serve {
namespace {

// The listening socket on HOST:PORT. SO_REUSEADDR lets a restarted server
// bind past its old connections in TIME_WAIT; SO_REUSEPORT is never set,
// so a second server on the same port fails here (EADDRINUSE) instead of
// getting half of the first one's connections.
Result<UniqueFd> Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return Fail(ErrorCode::kInvalid, where + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(found, &::freeaddrinfo);
  UniqueFd fd(::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, found->ai_protocol));
  if (!fd) return FailErrno(where, errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
    if (errno == EADDRINUSE)
      return Fail(ErrorCode::kBusy, where + ": port in use (another server listens there; stop it or choose another port)");
    if (errno == EADDRNOTAVAIL)
      return Fail(ErrorCode::kInvalid, where + ": cannot bind (not an address of this machine)");
    return FailErrno(where, errno);
  }
  // A burst of connections waits in a backlog this long, not for SYN retries.
  if (::listen(fd.get(), 511) != 0) return FailErrno(where, errno);
  return fd;
}

}  // namespace

bool IsLoopbackHost(const std::string& given) {
  std::string host = given.starts_with("[") && given.ends_with("]") ? given.substr(1, given.size() - 2) : given;
  if (host == "localhost") return true;
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  return ::inet_pton(AF_INET6, host.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

bool BearerMatches(const std::string& authorization, const std::string& token) {
  // RFC 9110: the scheme is case-insensitive, one or more spaces follow it.
  if (token.empty() || authorization.size() < 7 || ::strncasecmp(authorization.c_str(), "bearer ", 7) != 0) return false;
  std::string_view given = std::string_view(authorization).substr(7);
  while (given.starts_with(' ')) given.remove_prefix(1);
  if (given.size() != token.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) diff |= uint8_t(given[i]) ^ uint8_t(token[i]);
  return diff == 0;
}

Result<std::pair<std::string, int>> ParseListen(const std::string& spec) {
  size_t colon = spec.rfind(':');
  std::string host = colon == std::string::npos ? "" : spec.substr(0, colon);
  std::string port = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (host.starts_with("[") && host.ends_with("]")) host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long p = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  if (host.empty() || p < 0 || p > 65535 || *end)
    return Fail(ErrorCode::kInvalid, "--listen '" + spec + "': expected HOST:PORT, e.g. 127.0.0.1:8765 ([::1]:8765 for IPv6)");
  return std::pair<std::string, int>(host, int(p));
}

Result<std::string> LoadOrCreateToken(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd) {
    char buf[256];
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) return FailErrno(path, errno);
    std::string token(buf, size_t(n));
    while (!token.empty() && std::isspace(uint8_t(token.back()))) token.pop_back();
    if (token.empty()) return Fail(ErrorCode::kInvalid, path + ": empty token file; remove it to have a new token made");
    return token;
  }
  if (errno != ENOENT) return FailErrno(path, errno);
  AE_ASSIGN(std::string token, RandomHex(32));
  // Durable and never half-written (common/durable.h), 0600 from the start.
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  AE_TRY(WriteFileDurably(dir, path.substr(slash + 1), token + "\n", 0600));
  return token;
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& opt, const std::vector<HttpRoutes>& routes) {
  if (!IsLoopbackHost(opt.host) && opt.token.empty())
    return Fail(ErrorCode::kInvalid, "--listen " + opt.host + ": a bind that is not loopback needs a bearer token");
  AE_ASSIGN(UniqueFd fd, Listen(opt.host, opt.port));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) return FailErrno("getsockname", errno);
  std::unique_ptr<HttpServer> s(new HttpServer);
  s->opt_ = opt;
  s->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                               : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  s->loop_ = std::make_unique<Loop>(opt, std::move(fd), routes);
  AE_TRY(s->loop_->Start());
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (loop_) loop_->Stop();
}

std::string HttpServer::base_url() const {
  std::string host = opt_.host.find(':') != std::string::npos ? "[" + opt_.host + "]" : opt_.host;
  return "http://" + host + ":" + std::to_string(port_);
}

}  // namespace agentenv::serve
