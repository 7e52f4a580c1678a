// MCP over Streamable HTTP (serve/mcp_http.h).
#include "serve/mcp_http.h"

#include <unistd.h>

#include <httplib.h>

#include <deque>
#include <vector>

#include "common/random.h"
#include "serve/environments.h"

namespace agentenv::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The messages of one request on their way to its POST's response. Push
// is the request's Outbox (any thread); the handler's thread takes them.
// Locking rule: mu guards q and ended; nothing else is done holding it.
struct Stream {
  Mutex mu;
  CondVar cv;
  std::deque<json> q GUARDED_BY(mu);
  bool ended GUARDED_BY(mu) = false;

  void Push(const json& m) {
    MutexLock lock(mu);
    if (ended) return;
    if (m.is_null()) {
      ended = true;  // cancelled: no reply comes
    } else {
      q.push_back(m);
      ended = m.contains("id") && (m.contains("result") || m.contains("error"));
    }
    cv.notify_all();
  }
  // Waits until a message is queued or the stream ended (or stop is set),
  // or with `briefly` at most 200 ms; then takes what is queued.
  std::deque<json> Take(const std::atomic<bool>& stop, bool* ended_out, bool briefly = false) {
    MutexLock lock(mu);
    while (q.empty() && !ended && !stop) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      if (briefly) break;
    }
    *ended_out = ended || stop;
    return std::exchange(q, {});
  }
};

std::string NewSessionId() {
  if (auto id = RandomHex(16)) return *id;
  // Unique within the process still; the id is no secret (the token is).
  static std::atomic<uint64_t> n{0};
  return "s" + std::to_string(++n) + "-" + std::to_string(::getpid());
}

void JsonError(httplib::Response& res, int status, int code, const std::string& message) {
  res.status = status;
  res.set_content(json{{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", message}}}}.dump(),
                  "application/json");
}

// Ended session ids remembered, so their clients hear how they ended.
constexpr size_t kRememberEnded = 4096;

std::string Minutes(std::chrono::milliseconds d) {
  auto m = std::chrono::duration_cast<std::chrono::minutes>(d).count();
  return m >= 1 ? std::to_string(m) + " min" : std::to_string(d.count()) + " ms";
}

std::string SseEvent(const json& m) {
  return "event: message\ndata: " + m.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace

McpHttpEndpoint::McpHttpEndpoint(ToolRunner run, FileReader read, McpHttpOptions opt)
    : run_(std::move(run)), read_(std::move(read)), opt_(opt) {}

McpHttpEndpoint::~McpHttpEndpoint() { Stop(); }

void McpHttpEndpoint::Stop() {
  stopping_ = true;
  MutexLock lock(mu_);
  for (auto& [id, e] : sessions_) e.mcp->CancelAll();
}

size_t McpHttpEndpoint::sessions() {
  MutexLock lock(mu_);
  return sessions_.size();
}

void McpHttpEndpoint::RememberEnded(const std::string& id, const std::string& how) {
  if (ended_.emplace(id, how).second) ended_order_.push_back(id);
  while (ended_order_.size() > kRememberEnded) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

std::string McpHttpEndpoint::Unknown(const std::string& id) {
  auto it = ended_.find(id);
  if (it != ended_.end()) return "session " + id + " ended (" + it->second + "); initialize a new one";
  return "session " + id + " is unknown (this server never started it, or it restarted since); initialize a new one";
}

void McpHttpEndpoint::Expire(Clock::time_point now, std::vector<std::shared_ptr<McpSession>>* ended) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.mcp->in_flight() == 0 && now - it->second.used > opt_.idle_ttl) {
      RememberEnded(it->first, "idle for more than " + Minutes(opt_.idle_ttl));
      ended->push_back(std::move(it->second.mcp));
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<McpSession> McpHttpEndpoint::NewSession(const std::string& peer, const std::string& env,
                                                        const Grant& grant, std::string* id, std::string* why) {
  auto s = std::make_shared<McpSession>(run_, read_, opt_.session);
  s->set_environment(env);
  s->set_grant(grant);
  std::vector<std::shared_ptr<McpSession>> expired;  // cancelled outside the lock
  MutexLock lock(mu_);
  const auto now = opt_.now ? opt_.now() : Clock::now();
  Expire(now, &expired);
  size_t of_peer = 0;
  for (const auto& [sid, e] : sessions_) of_peer += e.peer == peer;
  if (of_peer >= opt_.max_sessions_per_peer) {
    *why = "too many sessions open from " + peer + " (" + std::to_string(of_peer) + "): end one with DELETE, or wait " +
           "until one has been idle for " + Minutes(opt_.idle_ttl);
    return nullptr;
  }
  if (sessions_.size() >= opt_.max_sessions) {
    *why = "too many sessions open (" + std::to_string(sessions_.size()) + "): end one with DELETE, or wait until " +
           "one has been idle for " + Minutes(opt_.idle_ttl);
    return nullptr;
  }
  do *id = NewSessionId();
  while (sessions_.count(*id) || ended_.count(*id));
  sessions_[*id] = Entry{s, peer, env, grant.token_id, now};
  s->set_session_id(*id);
  return s;
}

std::shared_ptr<McpSession> McpHttpEndpoint::FindSession(const std::string& id, const std::string& env,
                                                         const Grant& grant, std::string* why) {
  std::vector<std::shared_ptr<McpSession>> expired;
  MutexLock lock(mu_);
  const auto now = opt_.now ? opt_.now() : Clock::now();
  Expire(now, &expired);
  auto it = sessions_.find(id);
  // Another endpoint's or another token's session is unknown here: an id
  // says nothing of what it does not belong to.
  if (it == sessions_.end() || it->second.env != env || it->second.token_id != grant.token_id) {
    *why = Unknown(id);
    return nullptr;
  }
  it->second.used = now;
  return it->second.mcp;
}

bool McpHttpEndpoint::EndSession(const std::string& id, const std::string& env, const Grant& grant,
                                 std::string* why) {
  std::shared_ptr<McpSession> ended;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second.env != env || it->second.token_id != grant.token_id) {
      *why = Unknown(id);
      return false;
    }
    ended = std::move(it->second.mcp);
    sessions_.erase(it);
    RememberEnded(id, "ended by its client (DELETE)");
  }
  ended->CancelAll();
  return true;
}

HttpRoutes McpHttpEndpoint::Routes(const std::string& path) {
  // An MCP-Protocol-Version this server does not answer is refused (400);
  // false when it answered. Besides the versions a session negotiates it
  // answers 2025-03-26, the first with this transport: what it sends is a
  // superset a client of that version reads (the official conformance
  // suite still sends that header on raw requests).
  auto version_ok = [](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_header("MCP-Protocol-Version")) return true;
    const std::string v = req.get_header_value("MCP-Protocol-Version");
    if (IsSupportedProtocol(v) || v == "2025-03-26") return true;
    JsonError(res, 400, -32600, "unsupported MCP-Protocol-Version '" + v + "' (this server answers " +
                                    SupportedProtocols() + ", 2025-03-26)");
    return false;
  };
  // The environment a request's endpoint serves: its path's group, if any.
  auto env_of = [](const httplib::Request& req) { return req.matches.size() > 1 ? req.matches[1].str() : std::string(); };
  // The request's grant, or nullopt with the refusal answered: 401 for a
  // token that is none of ours, 403 for one that does not reach this
  // endpoint (the same whether or not its environment exists).
  auto admit = [this](const httplib::Request& req, httplib::Response& res, const std::string& env) -> std::optional<Grant> {
    Grant grant{true};
    if (opt_.authorize) {
      auto g = opt_.authorize(req.get_header_value("Authorization"));
      if (!g) {
        res.set_header("WWW-Authenticate", "Bearer");
        JsonError(res, 401, -32001, "missing or wrong bearer token");
        return std::nullopt;
      }
      grant = *g;
    }
    if (!Reaches(grant, env)) {
      JsonError(res, 403, -32001, "this token does not reach this endpoint");
      return std::nullopt;
    }
    return grant;
  };
  auto post = [this, version_ok, env_of, admit](const httplib::Request& req, httplib::Response& res) {
      if (!version_ok(req, res)) return;
      const std::string env = env_of(req);
      const std::optional<Grant> grant = admit(req, res, env);
      if (!grant) return;
      json msg = json::parse(req.body, nullptr, false);
      if (msg.is_discarded()) return JsonError(res, 400, -32700, "parse error: the body must be one JSON-RPC message");
      if (!msg.is_object())
        return JsonError(res, 400, -32600, "invalid request: one JSON-RPC object per POST (batches are not supported)");
      const bool request = msg.contains("method") && msg.contains("id");
      std::string sid = req.get_header_value("Mcp-Session-Id");
      std::shared_ptr<McpSession> session;
      std::string why;
      if (sid.empty()) {
        if (!request || msg.value("method", json()) != "initialize")
          return JsonError(res, 400, -32600, "invalid request: no Mcp-Session-Id header; start with initialize "
                                             "and send the session id it returns on every later request");
        if (!env.empty() && opt_.check_environment) {
          if (auto there = opt_.check_environment(env); !there)
            return JsonError(res, there.error().code == ErrorCode::kNotFound ? 404 : 400, -32001, there.error().message);
        }
        session = NewSession(req.remote_addr, env, *grant, &sid, &why);
        if (!session) {
          res.set_header("Retry-After", "60");
          return JsonError(res, 503, -32000, why);
        }
      } else if (!(session = FindSession(sid, env, *grant, &why))) {
        return JsonError(res, 404, -32001, why);
      }
      res.set_header("Mcp-Session-Id", sid);
      if (!request) {
        session->Handle(msg, [](const json&) {});  // a notification or a response: no reply
        res.status = 202;
        return;
      }
      auto stream = std::make_shared<Stream>();
      session->Handle(msg, [stream](const json& m) { stream->Push(m); });
      // A client that left (its connection closed) cancels its request,
      // as on the socket: a running command is stopped and recorded so.
      auto cancel = [session, id = msg["id"]] {
        session->Handle({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"},
                         {"params", {{"requestId", id}, {"reason", "the client's connection closed"}}}},
                        [](const json&) {});
      };
      bool ended = false;
      std::deque<json> first;
      while (first.empty() && !ended) {
        first = stream->Take(stopping_, &ended, true);
        if (first.empty() && !ended && !RequestClientConnected()) {
          cancel();
          return;
        }
      }
      if (ended && first.size() == 1) {
        res.set_content(first.front().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
        return;
      }
      if (ended && first.empty()) {  // cancelled, or the server is stopping: no reply
        res.status = 202;
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      auto pending = std::make_shared<std::deque<json>>(std::move(first));
      res.set_chunked_content_provider("text/event-stream", [this, stream, pending, cancel](size_t, httplib::DataSink& sink) {
        bool done = false;
        for (;;) {
          for (const json& m : *pending) {
            std::string event = SseEvent(m);
            if (!sink.write(event.data(), event.size())) {  // the client left
              if (!done) cancel();
              return false;
            }
          }
          pending->clear();
          if (done) {
            sink.done();
            return true;
          }
          *pending = stream->Take(stopping_, &done, true);
          // A client that left frees its thread and cancels its request.
          if (pending->empty() && !done && !sink.is_writable()) {
            cancel();
            return false;
          }
        }
      });
  };
  auto get = [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Allow", "POST, DELETE");
    JsonError(res, 405, -32000, "no server-initiated stream here: every message comes on the POST of its request");
  };
  auto del = [this, version_ok, env_of, admit](const httplib::Request& req, httplib::Response& res) {
    if (!version_ok(req, res)) return;
    const std::optional<Grant> grant = admit(req, res, env_of(req));
    if (!grant) return;
    const std::string sid = req.get_header_value("Mcp-Session-Id");
    if (sid.empty()) return JsonError(res, 400, -32600, "invalid request: DELETE names the session to end in Mcp-Session-Id");
    std::string why;
    if (!EndSession(sid, env_of(req), *grant, &why)) return JsonError(res, 404, -32001, why);
    res.status = 200;
  };
  auto install = [path, post, get, del](httplib::Server& svr) {
    for (const std::string& p : {path, std::string(kWorkspaceEndpointPattern)}) {
      svr.Post(p, post);
      svr.Get(p, get);
      svr.Delete(p, del);
    }
  };
  return HttpRoutes{install, [path](std::string_view method, std::string_view p) {
                      return method == "POST" && (p == path || WorkspaceOfPath(p));
                    }};
}

}  // namespace agentenv::serve
