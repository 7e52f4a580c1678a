// MCP over Streamable HTTP (serve/mcp_http.h).
#include "serve/mcp_http.h"

#include <unistd.h>

#include <httplib.h>

#include <condition_variable>
#include <deque>

#include "common/random.h"

namespace agentenv::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The messages of one request on their way to its POST's response. Push
// is the request's Outbox (any thread); the handler's thread takes them.
// Locking rule: mu guards q and ended; nothing else is done holding it.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<json> q;
  bool ended = false;

  void Push(const json& m) {
    std::lock_guard lock(mu);
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
    std::unique_lock lock(mu);
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

std::string SseEvent(const json& m) {
  return "event: message\ndata: " + m.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace

McpHttpEndpoint::McpHttpEndpoint(ToolRunner run, FileReader read, McpOptions opt)
    : run_(std::move(run)), read_(std::move(read)), opt_(opt) {}

McpHttpEndpoint::~McpHttpEndpoint() { Stop(); }

void McpHttpEndpoint::Stop() {
  stopping_ = true;
  std::lock_guard lock(mu_);
  for (auto& [id, e] : sessions_) e.mcp->CancelAll();
}

size_t McpHttpEndpoint::sessions() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

std::shared_ptr<McpSession> McpHttpEndpoint::NewSession(std::string* id) {
  auto s = std::make_shared<McpSession>(run_, read_, opt_);
  std::shared_ptr<McpSession> evicted;  // ended outside the lock: it waits for its requests
  std::lock_guard lock(mu_);
  if (sessions_.size() >= kMaxSessions) {
    auto lru = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second.mcp->in_flight() == 0 && (lru == sessions_.end() || it->second.used < lru->second.used)) lru = it;
    if (lru == sessions_.end()) return nullptr;
    evicted = std::move(lru->second.mcp);
    sessions_.erase(lru);
  }
  *id = NewSessionId();
  sessions_[*id] = Entry{s, Clock::now()};
  return s;
}

std::shared_ptr<McpSession> McpHttpEndpoint::FindSession(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  it->second.used = Clock::now();
  return it->second.mcp;
}

HttpRoutes McpHttpEndpoint::Routes(const std::string& path) {
  auto install = [this, path](httplib::Server& svr) {
    svr.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      json msg = json::parse(req.body, nullptr, false);
      if (msg.is_discarded()) return JsonError(res, 400, -32700, "parse error: the body must be one JSON-RPC message");
      if (!msg.is_object())
        return JsonError(res, 400, -32600, "invalid request: one JSON-RPC object per POST (batches are not supported)");
      const bool request = msg.contains("method") && msg.contains("id");
      std::string sid = req.get_header_value("Mcp-Session-Id");
      std::shared_ptr<McpSession> session;
      if (sid.empty()) {
        if (!request || msg.value("method", json()) != "initialize")
          return JsonError(res, 400, -32600, "invalid request: no Mcp-Session-Id header; start with initialize "
                                             "and send the session id it returns on every later request");
        session = NewSession(&sid);
        if (!session) return JsonError(res, 503, -32000, "too many sessions in use; end one (DELETE) and retry");
      } else if (!(session = FindSession(sid))) {
        return JsonError(res, 404, -32001, "session " + sid + " not found (it ended); initialize a new one");
      }
      res.set_header("Mcp-Session-Id", sid);
      if (!request) {
        session->Handle(msg, [](const json&) {});  // a notification or a response: no reply
        res.status = 202;
        return;
      }
      auto stream = std::make_shared<Stream>();
      session->Handle(msg, [stream](const json& m) { stream->Push(m); });
      bool ended = false;
      std::deque<json> first = stream->Take(stopping_, &ended);
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
      res.set_chunked_content_provider("text/event-stream", [this, stream, pending](size_t, httplib::DataSink& sink) {
        bool done = false;
        for (;;) {
          for (const json& m : *pending) {
            std::string event = SseEvent(m);
            if (!sink.write(event.data(), event.size())) return false;  // the client left
          }
          pending->clear();
          if (done) {
            sink.done();
            return true;
          }
          *pending = stream->Take(stopping_, &done, true);
          // A client that left frees its thread; the request runs on.
          if (pending->empty() && !done && !sink.is_writable()) return false;
        }
      });
    });
    svr.Get(path, [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Allow", "POST, DELETE");
      JsonError(res, 405, -32000, "no server-initiated stream here: every message comes on the POST of its request");
    });
    svr.Delete(path, [this](const httplib::Request& req, httplib::Response& res) {
      std::string sid = req.get_header_value("Mcp-Session-Id");
      std::shared_ptr<McpSession> ended;
      {
        std::lock_guard lock(mu_);
        auto it = sessions_.find(sid);
        if (it == sessions_.end()) return JsonError(res, 404, -32001, "session '" + sid + "' not found");
        ended = std::move(it->second.mcp);
        sessions_.erase(it);
      }
      ended->CancelAll();
      res.status = 200;
    });
  };
  return HttpRoutes{install, [path](std::string_view method, std::string_view p) { return method == "POST" && p == path; }};
}

}  // namespace agentenv::serve
