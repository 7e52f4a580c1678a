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
#include <map>
#include <system_error>

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

// One client: its descriptor, its writer and its requests in flight.
// Locking rule: a line goes out whole under write_mu and nothing else is
// done holding it; mu guards in_flight and running.
struct SocketServer::Connection {
  UniqueFd fd;
  std::mutex write_mu;
  std::mutex mu;
  std::condition_variable idle;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> in_flight;  // id.dump() -> cancelled
  size_t running = 0;

  bool Send(const nlohmann::json& j) {
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::lock_guard lock(write_mu);
    return SendAll(fd.get(), line);
  }
  // Ends a request: its id leaves in_flight, and Serve may end once none runs.
  void Done(bool has_id, const std::string& key) {
    std::lock_guard lock(mu);
    if (has_id) in_flight.erase(key);
    if (--running == 0) idle.notify_all();
  }
  // Whether the peer still listens (it has not hung up nor shut down its side).
  bool PeerThere() {
    pollfd p{fd.get(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }
};

namespace {
nlohmann::json ErrorResponse(const nlohmann::json& req, ErrorCode code, const std::string& msg) {
  nlohmann::json resp = {{"ok", false}, {"error", control::ErrorJson(Error{msg, 0, code})}};
  if (req.is_object() && req.contains("id")) resp["id"] = req["id"];
  return resp;
}

// One recv that also takes the descriptors passed with what it reads
// (SCM_RIGHTS, close-on-exec). A stream socket never returns bytes of two
// sends that carry descriptors in one read, so the descriptors belong to
// the first byte returned. More than control::kMaxPassedFds are closed and
// reported as *truncated.
ssize_t RecvWithFds(int fd, char* buf, size_t size, std::vector<UniqueFd>* fds, bool* truncated) {
  struct iovec iov {buf, size};
  alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * control::kMaxPassedFds)];
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof ctl;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n <= 0) return n;
  *truncated = msg.msg_flags & MSG_CTRUNC;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int passed;
      std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
      fds->emplace_back(passed);
    }
  }
  return n;
}

}  // namespace

void SocketServer::Dispatch(const std::shared_ptr<Connection>& conn, nlohmann::json req,
                            std::vector<UniqueFd> fds) {
  const bool has_id = req.contains("id");
  const std::string key = has_id ? req["id"].dump() : "";
  const std::string op = req["op"].get<std::string>();
  nlohmann::json args = req.value("args", nlohmann::json::object());
  // Descriptors come only as exec's stdin, stdout and stderr.
  if (!fds.empty() && fds.size() != 3) {
    conn->Send(ErrorResponse(req, ErrorCode::kInvalid, "a request passes no descriptors or exactly 3 (exec's stdin, "
                                                         "stdout and stderr), not " + std::to_string(fds.size())));
    return;
  }
  if (op == "cancel") {  // socket-only: it acts on this connection's requests
    if (!args.is_object() || !args.contains("id")) {
      conn->Send(ErrorResponse(req, ErrorCode::kInvalid, "cancel needs args.id, the id of a request in flight on this connection"));
      return;
    }
    bool found = false;
    {
      std::lock_guard lock(conn->mu);
      auto it = conn->in_flight.find(args["id"].dump());
      if (it != conn->in_flight.end()) *it->second = found = true;
    }
    nlohmann::json resp = {{"ok", true}, {"result", {{"cancelled", found}}}};
    if (has_id) resp["id"] = req["id"];
    conn->Send(resp);
    return;
  }
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  {
    std::lock_guard lock(conn->mu);
    if (conn->running >= kMaxInFlight) {
      conn->Send(ErrorResponse(req, ErrorCode::kBusy, "busy: " + std::to_string(kMaxInFlight) +
                                                          " requests of this connection are already running (the limit); "
                                                          "wait for a response or open another connection"));
      return;
    }
    if (has_id && !conn->in_flight.emplace(key, cancelled).second) {
      conn->Send(ErrorResponse(req, ErrorCode::kInvalid, "id " + key + " is already used by a request in flight on this connection"));
      return;
    }
    ++conn->running;
  }
  nlohmann::json id = has_id ? req["id"] : nlohmann::json();
  auto passed = std::make_shared<std::vector<UniqueFd>>(std::move(fds));
  // Who asked, as the client says (the CLI, an MCP server it relays for);
  // a client that says nothing is a socket client.
  snap::Requester who{snap::Origin::kSocket, "", ""};
  if (req.contains("who") && req["who"].is_object()) {
    const auto& w = req["who"];
    if (w.contains("origin") && w["origin"].is_string())
      who.origin = snap::OriginFromName(w["origin"].get<std::string>()).value_or(snap::Origin::kSocket);
    if (w.contains("client") && w["client"].is_string())
      who.client = snap::CutUtf8(w["client"].get<std::string>(), snap::Provenance::kMaxName);
    if (w.contains("session") && w["session"].is_string())
      who.session = snap::CutUtf8(w["session"].get<std::string>(), snap::Provenance::kMaxName);
  }
  auto run = [this, conn, id, op, args = std::move(args), cancelled, has_id, key, passed, who] {
    control::CallContext call([&](nlohmann::json frame) {
      if (*cancelled) return false;
      if (frame.is_null()) return conn->PeerThere();
      if (has_id) frame["id"] = id;
      return conn->Send(frame);
    });
    if (!passed->empty()) call.stdio = std::array<int, 3>{(*passed)[0].get(), (*passed)[1].get(), (*passed)[2].get()};
    call.who = who;
    Result<nlohmann::json> r = handler_(op, args, call);
    // The caller's terminal is ours no longer: it sees end of file once
    // its command's processes are gone, not when this thread is reused.
    passed->clear();
    nlohmann::json resp;
    if (has_id) resp["id"] = id;
    resp["ok"] = bool(r);
    if (r) resp["result"] = std::move(*r);
    else resp["error"] = control::ErrorJson(r.error());
    // The slot is free before the reply goes out: a client that has read
    // a reply may send its next request at once without meeting `busy`.
    conn->Done(has_id, key);
    conn->Send(resp);
  };
  try {
    requests_.Run(std::move(run));
  } catch (const std::system_error& e) {
    conn->Done(has_id, key);  // first, as for a reply: the id is free once the client reads this
    conn->Send(ErrorResponse(req, ErrorCode::kBusy, std::string("cannot start a thread for the request: ") + e.what() +
                                                        "; retry when fewer requests run"));
  }
}

void SocketServer::Serve(UniqueFd client) {
  auto conn = std::make_shared<Connection>();
  conn->fd = std::move(client);
  std::string buf;
  char chunk[65536];
  // Descriptors passed with a read, by the stream offset of its first byte
  // (buf[0] is at offset `consumed`): they belong to the line that holds it.
  std::vector<std::pair<uint64_t, std::vector<UniqueFd>>> passed;
  uint64_t consumed = 0;
  for (;;) {
    pollfd p[2] = {{conn->fd.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents) break;
    std::vector<UniqueFd> fds;
    bool truncated = false;
    ssize_t n = RecvWithFds(conn->fd.get(), chunk, sizeof chunk, &fds, &truncated);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (truncated) {
      conn->Send(ErrorResponse(nlohmann::json(), ErrorCode::kInvalid, "more than 3 descriptors passed at once: the "
                                                                      "connection is closed"));
      break;
    }
    if (!fds.empty()) passed.emplace_back(consumed + buf.size(), std::move(fds));
    size_t scanned = buf.size();  // no newline before here
    buf.append(chunk, n);
    size_t nl;
    while ((nl = buf.find('\n', scanned)) != std::string::npos) {
      scanned = 0;
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      const uint64_t start = consumed;
      consumed += nl + 1;
      std::vector<UniqueFd> with;  // this line's; those of earlier bytes are closed
      while (!passed.empty() && passed.front().first < consumed) {
        if (passed.front().first == start) with = std::move(passed.front().second);
        passed.erase(passed.begin());
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto req = nlohmann::json::parse(line, nullptr, false);
      if (req.is_discarded() || !req.is_object() || !req.contains("op") || !req["op"].is_string()) {
        conn->Send(ErrorResponse(req.is_discarded() ? nlohmann::json() : req, ErrorCode::kInvalid,
                                 "expected one JSON object per line: {\"op\":\"log\",\"args\":{}}"));
        continue;
      }
      Dispatch(conn, std::move(req), std::move(with));
    }
    if (buf.size() > control::kMaxRequestBytes) {
      conn->Send(ErrorResponse(nlohmann::json(), ErrorCode::kInvalid,
                               "request line longer than 16 MiB (the socket's limit): the connection is closed; "
                               "send smaller requests"));
      break;
    }
  }
  // The requests already read still run to their responses (a client may
  // shut down its side after sending); a reply still being written holds
  // the connection open through its task's reference.
  std::unique_lock lock(conn->mu);
  conn->idle.wait(lock, [&] { return conn->running == 0; });
}

}  // namespace agentenv::serve
