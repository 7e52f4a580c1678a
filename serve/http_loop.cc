// The HTTP listener's event loop (serve/http_loop.h).
#include "serve/http_loop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <strings.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>

namespace agentenv::serve {
namespace {

using Clock = HttpClock;
using State = HttpConn::State;

constexpr uint64_t kListeningId = 0, kWakeId = 1;
// A connection serves at most this many requests, then closes.
constexpr size_t kMaxRequestsPerConn = 1000;
// A closed connection's last reply gets this long to drain (no RST over it).
constexpr auto kLinger = std::chrono::seconds(2);
// What a connection may hold unserved: a whole head and a small body.
constexpr size_t kMaxBuffered = kMaxHeadBytes + kFrontBodyBytes;
constexpr uint64_t kMaxBodyBytes = uint64_t{16} << 20;

int Ms(Clock::duration d) { return int(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); }

const char* Reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

std::string PeerOf(const sockaddr_storage& a, int* port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    *port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    *port = ntohs(v6.sin6_port);
  }
  std::string peer = text;
  return peer.starts_with("::ffff:") && peer.find('.') != std::string::npos ? peer.substr(7) : peer;
}

// The connection the current thread serves a request of (for
// RequestClientConnected); null outside a request.
thread_local const httplib::Stream* t_serving = nullptr;

// A request thread's view of its connection: the bytes the loop buffered
// first, then the socket, each read and write under a deadline. cpp-httplib
// parses the head again from it and reads exactly the body it announced,
// so what follows (a pipelined request) stays in the buffer for the loop.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(HttpConn& c, const std::atomic<bool>& stopping, const HttpLimits& lim)
      : c_(c), stopping_(stopping), lim_(lim), read_deadline_(Clock::now() + lim.body_timeout) {}

  bool is_readable() const override { return pos_ < c_.in.size() || Poll(POLLIN, 0); }
  // Whether the client is still there: false once it closed or shut its
  // side, or the listener stops (an event stream's loop asks this).
  bool is_writable() const override {
    if (stopping_) return false;
    pollfd p{c_.fd.get(), POLLOUT | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) >= 0 && !(p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL));
  }
  ssize_t read(char* ptr, size_t size) override {
    while (pos_ == c_.in.size()) {
      if (stopping_) return -1;
      const int left = Ms(read_deadline_ - Clock::now());
      if (left <= 0 || !Poll(POLLIN, std::min(left, 250))) {
        if (left <= 0) return -1;
        continue;
      }
      char buf[16384];
      ssize_t n = ::recv(c_.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return -1;
      }
      c_.in.append(buf, size_t(n));
    }
    const size_t n = std::min(size, c_.in.size() - pos_);
    std::copy_n(c_.in.data() + pos_, n, ptr);
    pos_ += n;
    return ssize_t(n);
  }
  // One write must be done within write_timeout: a client that stops
  // reading (or reads a byte a second) ends its reply, not the server.
  ssize_t write(const char* ptr, size_t size) override {
    const auto deadline = Clock::now() + lim_.write_timeout;
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::send(c_.fd.get(), ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) return -1;
      const int left = Ms(deadline - Clock::now());
      if (stopping_ || left <= 0) return -1;
      (void)Poll(POLLOUT, std::min(left, 250));
    }
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.peer;
    port = c_.peer_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getsockname(c_.fd.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = PeerOf(a, &port);
  }
  // Read by the library only to refuse a descriptor past FD_SETSIZE, which
  // its select() could not watch; nothing here selects.
  socket_t socket() const override { return c_.fd.get() < FD_SETSIZE ? c_.fd.get() : INVALID_SOCKET; }

  size_t consumed() const { return pos_; }

 private:
  bool Poll(short events, int ms) const {
    pollfd p{c_.fd.get(), events, 0};
    return ::poll(&p, 1, ms) > 0;
  }
  HttpConn& c_;
  const std::atomic<bool>& stopping_;
  const HttpLimits& lim_;
  const Clock::time_point read_deadline_;
  size_t pos_ = 0;
};

}  // namespace

bool RequestClientConnected() { return !t_serving || t_serving->is_writable(); }

Router::Router() {
  svr_sock_ = 0;  // any valid descriptor: content providers run while it is set
  set_payload_max_length(kMaxBodyBytes);
}

bool Router::Serve(httplib::Stream& s, const RequestHead& head, bool body_read, bool close, bool* closed) {
  const bool no_body = head.body == RequestHead::Body::kNone && !head.Count("Content-Length");
  return process_request(s, close, *closed, [&](httplib::Request& req) {
    if (body_read) req.headers.erase("Expect");
    // The library reads a POST or DELETE without a length until the client
    // closes; the head said there is no body.
    if (no_body) req.set_header("Content-Length", "0");
  });
}

HttpServer::Loop::Loop(const HttpOptions& opt, UniqueFd listening, const std::vector<HttpRoutes>& routes)
    : opt_(opt),
      guard_{IsLoopbackHost(opt.host), opt.token, opt.allowed_origins, {}, {}, opt.scoped_tokens},
      listening_(std::move(listening)) {
  router_.set_keep_alive_timeout(std::max<time_t>(1, opt.limits.idle_timeout.count() / 1000));
  router_.set_keep_alive_max_count(kMaxRequestsPerConn);
  for (const HttpRoutes& r : routes) {
    if (r.install) r.install(router_);
    if (r.long_lived) long_lived_.push_back(r.long_lived);
    if (r.open) guard_.open.push_back(r.open);
    if (r.session_token) guard_.sessions.push_back(r.session_token);
  }
}

HttpServer::Loop::~Loop() { Stop(); }

Result<void> HttpServer::Loop::Start() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) return FailErrno("epoll_create1", errno);
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) return FailErrno("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListeningId;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listening_.get(), &ev) != 0) return FailErrno("epoll_ctl", errno);
  ev.data.u64 = kWakeId;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) return FailErrno("epoll_ctl", errno);
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    return Fail(ErrorCode::kIo, std::string("HTTP listener: cannot start its thread: ") + e.what());
  }
  return {};
}

void HttpServer::Loop::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  router_.Stopping();
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

void HttpServer::Loop::Run() {
  epoll_event events[64];
  while (!stopping_) {
    int n = ::epoll_wait(epoll_.get(), events, 64, NextWakeMs(Clock::now()));
    const auto now = Clock::now();
    for (int i = 0; i < std::max(n, 0); ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListeningId) {
        Accept(now);
      } else if (id == kWakeId) {
        uint64_t count;
        (void)!::read(wake_.get(), &count, sizeof count);
      } else if (auto it = conns_.find(id); it != conns_.end()) {
        OnInput(*it->second, now);
      }
    }
    TakeBack(now);
    Expire(now);
    for (uint64_t id : dead_) conns_.erase(id);
    dead_.clear();
  }
  // Stopping: no new connection; the busy ones' sockets are shut down so
  // their threads' reads and writes fail, and each comes back.
  listening_.reset();
  for (auto& [id, c] : conns_)
    if (c->state == State::kBusy) ::shutdown(c->fd.get(), SHUT_RDWR);
  for (auto* c : waiting_) Close(*c);
  waiting_.clear();
  while (short_running_ + long_running_ > 0) {
    pollfd p{wake_.get(), POLLIN, 0};
    ::poll(&p, 1, 100);
    uint64_t count;
    (void)!::read(wake_.get(), &count, sizeof count);
    TakeBack(Clock::now());
  }
  conns_.clear();
}

void HttpServer::Loop::Watch(HttpConn& c) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = c.id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.fd.get(), &ev);
}

void HttpServer::Loop::Unwatch(HttpConn& c) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr); }

void HttpServer::Loop::Accept(Clock::time_point now) {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    UniqueFd fd(::accept4(listening_.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (Evict(nullptr)) continue;
        // Nothing to close for it: leave the connection in the backlog a
        // while rather than spin on it.
        epoll_event ev{};
        ev.data.u64 = kListeningId;
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listening_.get(), &ev);
        accept_paused_until_ = now + std::chrono::milliseconds(100);
      }
      return;
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int port = 0;
    std::string peer = PeerOf(addr, &port);
    auto count = per_peer_.find(peer);
    if (count != per_peer_.end() && count->second >= opt_.limits.max_per_peer && !Evict(&peer)) continue;
    if (live_ >= opt_.limits.max_connections && !Evict(nullptr)) continue;
    auto c = std::make_unique<HttpConn>();
    c->id = next_id_++;
    c->fd = std::move(fd);
    c->peer = std::move(peer);
    c->peer_port = port;
    c->since = now;
    c->deadline = now + opt_.limits.head_timeout;
    ++per_peer_[c->peer];
    ++live_;
    Watch(*c);
    conns_[c->id] = std::move(c);
  }
}

void HttpServer::Loop::OnInput(HttpConn& c, Clock::time_point now) {
  if (c.state == State::kClosed || c.state == State::kBusy || c.state == State::kWaiting) return;
  bool eof = false;
  char buf[16384];
  for (;;) {
    const size_t room = c.state == State::kClosing ? sizeof buf : std::min(sizeof buf, kMaxBuffered - c.in.size());
    if (room == 0) break;
    ssize_t n = ::recv(c.fd.get(), buf, room, MSG_DONTWAIT);
    if (n > 0) {
      if (c.state != State::kClosing) c.in.append(buf, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    eof = n == 0 || errno != EAGAIN;
    break;
  }
  if (c.state == State::kClosing) {
    if (eof) Close(c);
    return;
  }
  if (eof) c.peer_done = true;
  Advance(c, now);
  if (eof && (c.state == State::kRequest || c.state == State::kIdle)) Close(c);
}

void HttpServer::Loop::Idle(HttpConn& c, Clock::time_point now) {
  c.head.reset();
  c.refusal = {};
  c.continue_sent = false;
  c.state = State::kIdle;
  c.since = now;
  c.deadline = now + opt_.limits.idle_timeout;
}

void HttpServer::Loop::Advance(HttpConn& c, Clock::time_point now) {
  for (;;) {
    if (c.state == State::kIdle) {
      if (c.in.empty()) return;
      c.state = State::kRequest;  // its first byte: the head's deadline starts
      c.since = now;
      c.deadline = now + opt_.limits.head_timeout;
    }
    if (c.state != State::kRequest) return;
    if (!c.head) {
      HeadParse p = ParseHead(c.in);
      if (p.status == HeadParse::Status::kIncomplete) return;
      if (p.status == HeadParse::Status::kBad) return Reply(c, p.http_status, "bad request: " + p.why, true, now);
      c.head = std::move(p.head);
      c.refusal = Guard(*c.head, guard_);
      const bool sized = c.head->body == RequestHead::Body::kLength;
      if (sized && c.head->length > kMaxBodyBytes)
        return Reply(c, 413, "a request body is at most 16 MiB", true, now);
      c.request_bytes = c.head->size + (sized ? c.head->length : 0);
      c.body_in_front = c.head->body == RequestHead::Body::kNone || (sized && c.head->length <= kFrontBodyBytes);
      if (!c.body_in_front) {
        // Only a request past the guard has its large body read, on its thread.
        if (c.refusal) return Reply(c, c.refusal.status, c.refusal.message, true, now);
        return Dispatch(c, now);
      }
    }
    if (c.in.size() < c.request_bytes) {
      if (c.refusal) return Reply(c, c.refusal.status, c.refusal.message, true, now);
      if (!c.continue_sent && ::strcasecmp(c.head->Value("Expect").c_str(), "100-continue") == 0) {
        c.continue_sent = true;
        static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        (void)::send(c.fd.get(), kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      return;
    }
    if (c.refusal) {
      Reply(c, c.refusal.status, c.refusal.message, !c.head->keep_alive() || c.peer_done, now);
      continue;
    }
    Dispatch(c, now);
    if (c.state != State::kIdle) return;  // else refused with 503: the next request may be here
  }
}

void HttpServer::Loop::Dispatch(HttpConn& c, Clock::time_point now) {
  const std::string path = c.head->path();
  c.long_lived = std::any_of(long_lived_.begin(), long_lived_.end(), [&](const auto& f) { return f(c.head->method, path); });
  if (c.long_lived) {
    if (long_running_ >= opt_.limits.max_long)
      return Reply(c, 503, "too many long-lived requests (event streams, MCP requests) at once; retry later",
                   !c.body_in_front, now, "Retry-After: 1\r\n");
    ++long_running_;
    return Launch(c);
  }
  if (short_running_ < opt_.limits.max_short) {
    ++short_running_;
    return Launch(c);
  }
  Unwatch(c);
  c.state = State::kWaiting;
  waiting_.push_back(&c);
}

void HttpServer::Loop::Launch(HttpConn& c) {
  if (c.state != State::kWaiting) Unwatch(c);
  c.state = State::kBusy;
  try {
    threads_.Run([this, p = &c] { Serve(p); });
  } catch (const std::system_error&) {
    // No thread for it: the connection comes back closed, as after a failure.
    MutexLock lock(mu_);
    back_.emplace_back(&c, false);
  }
}

void HttpServer::Loop::Serve(HttpConn* c) {
  ConnStream stream(*c, stopping_, opt_.limits);
  t_serving = &stream;
  bool closed = false;
  // The router reads a body only for the methods that have one; another's
  // body stays unread, so the connection ends with this reply (and says so).
  const std::string& m = c->head->method;
  const bool body_unread = c->head->body != RequestHead::Body::kNone && m != "POST" && m != "PUT" && m != "PATCH" &&
                           m != "DELETE" && m != "PRI";
  const bool close = stopping_ || c->peer_done || body_unread || c->served + 1 >= kMaxRequestsPerConn;
  const bool ok = router_.Serve(stream, *c->head, c->body_in_front, close, &closed);
  t_serving = nullptr;
  // The connection stays open only when the request was read exactly as
  // announced (a chunked body, or one the router refused unread, ends it).
  const bool again = ok && !closed && !close && c->head->body != RequestHead::Body::kChunked &&
                     stream.consumed() == c->request_bytes;
  c->in.erase(0, std::min(stream.consumed(), c->in.size()));
  {
    MutexLock lock(mu_);
    back_.emplace_back(c, again);
  }
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void HttpServer::Loop::TakeBack(Clock::time_point now) {
  std::vector<std::pair<HttpConn*, bool>> back;
  {
    MutexLock lock(mu_);
    back.swap(back_);
  }
  for (auto [c, again] : back) {
    --(c->long_lived ? long_running_ : short_running_);
    ++c->served;
    if (!again || stopping_) {
      c->state = State::kIdle;  // no longer busy: Close may take it
      Close(*c);
      continue;
    }
    Idle(*c, now);
    Watch(*c);
    Advance(*c, now);  // a pipelined request may be whole already
  }
  while (!stopping_ && !waiting_.empty() && short_running_ < opt_.limits.max_short) {
    HttpConn* c = waiting_.front();
    waiting_.pop_front();
    ++short_running_;
    Launch(*c);
  }
}

void HttpServer::Loop::Reply(HttpConn& c, int status, const std::string& message, bool close, Clock::time_point now,
                             const std::string& extra_headers) {
  nlohmann::json body = {{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", -32001}, {"message", message}}}};
  const std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
                    "\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: " +
                    std::to_string(text.size()) + "\r\n" + extra_headers +
                    (c.refusal.bearer_challenge && status == 401 ? "WWW-Authenticate: Bearer\r\n" : "") +
                    (close ? "Connection: close\r\n" : "") + "\r\n" + text;
  ++c.served;
  // A reply that does not fit the socket's buffer at once goes to a client
  // that reads none of them: it is closed instead.
  if (::send(c.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != ssize_t(out.size())) return Close(c);
  if (close || c.served >= kMaxRequestsPerConn) {
    ::shutdown(c.fd.get(), SHUT_WR);
    c.in.clear();
    c.head.reset();
    c.state = State::kClosing;
    c.since = now;
    c.deadline = now + kLinger;
    return;
  }
  c.in.erase(0, std::min(c.request_bytes, c.in.size()));
  Idle(c, now);
}

void HttpServer::Loop::Close(HttpConn& c) {
  if (c.state == State::kClosed || c.state == State::kBusy) return;
  if (auto it = per_peer_.find(c.peer); it != per_peer_.end() && --it->second == 0) per_peer_.erase(it);
  if (c.state != State::kWaiting) Unwatch(c);
  c.fd.reset();
  c.state = State::kClosed;
  --live_;
  dead_.push_back(c.id);
}

bool HttpServer::Loop::Evict(const std::string* peer) {
  std::string from;
  if (peer) {
    from = *peer;
  } else {
    size_t most = 0;
    for (const auto& [p, n] : per_peer_)
      if (n > most) most = n, from = p;
  }
  HttpConn* victim = nullptr;
  for (int pass = 0; pass < 2 && !victim; ++pass) {  // that peer's first; any peer's when it has none
    if (pass == 1 && peer) break;
    for (auto& [id, c] : conns_) {
      const bool evictable = c->state == State::kRequest || c->state == State::kIdle || c->state == State::kClosing;
      if (evictable && (pass == 1 || c->peer == from) && (!victim || c->since < victim->since)) victim = c.get();
    }
  }
  if (!victim) return false;
  Close(*victim);
  return true;
}

void HttpServer::Loop::Expire(Clock::time_point now) {
  if (accept_paused_until_ && now >= *accept_paused_until_) {
    accept_paused_until_.reset();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListeningId;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listening_.get(), &ev);
  }
  for (auto& [id, c] : conns_) {
    const bool timed = c->state == State::kRequest || c->state == State::kIdle || c->state == State::kClosing;
    if (!timed || now < c->deadline) continue;
    if (c->state == State::kRequest && !c->in.empty()) {
      static constexpr char k408[] = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)::send(c->fd.get(), k408, sizeof k408 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    Close(*c);
  }
}

int HttpServer::Loop::NextWakeMs(Clock::time_point now) const {
  Clock::time_point next = now + std::chrono::seconds(1);
  if (accept_paused_until_) next = std::min(next, *accept_paused_until_);
  for (const auto& [id, c] : conns_)
    if (c->state == State::kRequest || c->state == State::kIdle || c->state == State::kClosing)
      next = std::min(next, c->deadline);
  return std::max(0, Ms(next - now) + 1);
}

}  // namespace agentenv::serve
