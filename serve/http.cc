// The HTTP listener and its guard (serve/http.h).
#include "serve/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

#include "common/durable.h"
#include "common/random.h"
#include "common/unique_fd.h"

namespace agentenv::serve {
namespace {

// The host part of a Host header or an origin's authority ("[::1]:80",
// "localhost:8080", "example.com").
std::string HostOf(std::string authority) {
  if (authority.starts_with("[")) {
    size_t end = authority.find(']');
    return end == std::string::npos ? authority : authority.substr(1, end - 1);
  }
  size_t colon = authority.rfind(':');
  return colon == std::string::npos ? authority : authority.substr(0, colon);
}

bool LoopbackOrigin(const std::string& origin) {
  for (const char* scheme : {"http://", "https://"})
    if (origin.starts_with(scheme)) return IsLoopbackHost(HostOf(origin.substr(std::strlen(scheme))));
  return false;
}

void Refuse(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  nlohmann::json body = {{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", -32001}, {"message", message}}}};
  res.set_content(body.dump(), "application/json");
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
  if (token.empty() || !authorization.starts_with("Bearer ")) return false;
  std::string_view given = std::string_view(authorization).substr(7);
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
  const bool loopback = IsLoopbackHost(opt.host);
  if (!loopback && opt.token.empty())
    return Fail(ErrorCode::kInvalid, "--listen " + opt.host + ": a bind that is not loopback needs a bearer token");
  std::unique_ptr<HttpServer> s(new HttpServer);
  s->opt_ = opt;
  s->svr_ = std::make_unique<httplib::Server>();
  httplib::Server& svr = *s->svr_;
  const int threads = opt.threads;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  svr.set_payload_max_length(size_t{16} << 20);
  // The library listens with a backlog of 5: a burst of connections past
  // it waits for SYN retries (a second each). The socket is ours to widen.
  auto listen_fd = std::make_shared<int>(-1);
  svr.set_socket_options([listen_fd](int sock) {
    httplib::default_socket_options(sock);
    if (*listen_fd < 0) *listen_fd = sock;
  });
  svr.set_pre_routing_handler([o = s->opt_, loopback](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    if (loopback && !IsLoopbackHost(HostOf(req.get_header_value("Host")))) {
      Refuse(res, 403, "Host '" + req.get_header_value("Host") + "' refused: this server answers only to a loopback "
                       "name (localhost, 127.0.0.1, [::1])");
      return R::Handled;
    }
    if (req.has_header("Origin")) {
      std::string origin = req.get_header_value("Origin");
      bool allowed = LoopbackOrigin(origin);
      for (const auto& a : o.allowed_origins) allowed |= origin == a;
      if (!allowed) {
        Refuse(res, 403, "Origin '" + origin + "' refused: allow it with --allow-origin");
        return R::Handled;
      }
    }
    if (!o.token.empty()) {
      if (!BearerMatches(req.get_header_value("Authorization"), o.token)) {
        res.set_header("WWW-Authenticate", "Bearer");
        Refuse(res, 401, "missing or wrong bearer token: send 'Authorization: Bearer <token>' (the token is in the "
                         "file the server printed at start)");
        return R::Handled;
      }
    }
    return R::Unhandled;
  });
  for (const auto& r : routes) r(svr);
  if (opt.port == 0) {
    s->port_ = svr.bind_to_any_port(opt.host);
    if (s->port_ < 0) return Fail(ErrorCode::kInvalid, opt.host + ": cannot bind (not an address of this machine?)");
  } else {
    if (!svr.bind_to_port(opt.host, opt.port))
      return Fail(ErrorCode::kBusy, opt.host + ":" + std::to_string(opt.port) + ": cannot bind (the port is in use, or "
                                    "the address is not this machine's)");
    s->port_ = opt.port;
  }
  if (*listen_fd >= 0) ::listen(*listen_fd, 256);
  s->thread_ = std::thread([p = s.get()] { p->svr_->listen_after_bind(); });
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (!svr_) return;
  svr_->stop();
  if (thread_.joinable()) thread_.join();
  svr_.reset();  // waits for the requests being served
}

std::string HttpServer::base_url() const {
  std::string host = opt_.host.find(':') != std::string::npos ? "[" + opt_.host + "]" : opt_.host;
  return "http://" + host + ":" + std::to_string(port_);
}

}  // namespace agentenv::serve
