// The HTTP listener's event loop (serve/http.h tells what it bounds):
// internal to serve/http.cc and serve/http_loop.cc.
//
// Threads and what they own. The loop thread owns every connection that
// is not being served (its Conn, its buffer, the counts below) and is the
// only one to open, close or watch a socket. A connection handed to a
// request thread (state kBusy) is that thread's until it puts it into
// `back_` (under mu_) and wakes the loop; the loop touches nothing of a
// busy connection but, when stopping, shuts its socket down (which the
// request thread then sees as an error).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "serve/http.h"
#include "serve/http_head.h"
#include "serve/request_threads.h"

namespace agentenv::serve {

using HttpClock = std::chrono::steady_clock;

// cpp-httplib's Server, used to parse a request that the loop has checked
// and to route it, never for its own socket loop (it would hold a thread
// per connection). process_request is its protected entry for one request
// on a Stream; svr_sock_ is what its content providers poll to learn that
// the server stops.
class Router : public httplib::Server {
 public:
  Router();
  // Parses, routes and answers the request `head` (ParseHead's) that `s`
  // starts with. `body_read` says the body is buffered already (an Expect
  // header was answered, or need not be). False when the connection
  // failed; *closed when it must close after this reply.
  bool Serve(httplib::Stream& s, const RequestHead& head, bool body_read, bool close, bool* closed);
  void Stopping() { svr_sock_ = INVALID_SOCKET; }
};

struct HttpConn {
  enum class State {
    kRequest,  // reading a request's head (and small body), under head_timeout
    kIdle,     // kept alive between requests, under idle_timeout
    kWaiting,  // whole and past the guard, waiting for a short request's thread
    kBusy,     // a request thread serves it
    kClosing,  // a last reply sent, its write side shut: input drained until EOF
    kClosed,   // to be erased at the end of this turn of the loop
  };
  uint64_t id = 0;
  UniqueFd fd;
  std::string peer;  // the address, one bucket of the per-peer cap
  int peer_port = 0;
  std::string in;    // read, not yet served
  State state = State::kRequest;
  HttpClock::time_point since, deadline;  // entered the state; when it times out
  std::optional<RequestHead> head;        // of the request being read, once whole
  Refusal refusal;
  size_t request_bytes = 0;  // head plus a Content-Length body
  bool body_in_front = false;  // the body is read here, not by the request thread
  bool continue_sent = false;  // "100 Continue" sent for it
  bool long_lived = false;
  bool peer_done = false;  // the client shut its side: no request after this one
  size_t served = 0;
};

class HttpServer::Loop {
 public:
  Loop(const HttpOptions& opt, UniqueFd listening, const std::vector<HttpRoutes>& routes);
  ~Loop();
  // Starts the loop thread. Errors: I/O (epoll, eventfd, thread).
  Result<void> Start();
  void Stop();

 private:
  void Run();
  void Accept(HttpClock::time_point now);
  void OnInput(HttpConn& c, HttpClock::time_point now);
  // Decides what the bytes buffered for `c` call for: wait, refuse, serve.
  void Advance(HttpConn& c, HttpClock::time_point now);
  void Dispatch(HttpConn& c, HttpClock::time_point now);
  void Launch(HttpConn& c);
  void Serve(HttpConn* c);  // on a request thread
  void TakeBack(HttpClock::time_point now);
  // A reply written here (refusals, 408, 503); closing shuts the write
  // side and drains what the client still sends (kClosing).
  void Reply(HttpConn& c, int status, const std::string& message, bool close, HttpClock::time_point now,
             const std::string& extra_headers = "");
  void Close(HttpConn& c);
  // Closes the oldest connection not being served: of `peer`, or (null)
  // of the peer with the most. False when there is none.
  bool Evict(const std::string* peer);
  void Expire(HttpClock::time_point now);
  int NextWakeMs(HttpClock::time_point now) const;
  void Watch(HttpConn& c);
  void Unwatch(HttpConn& c);
  void Idle(HttpConn& c, HttpClock::time_point now);

  const HttpOptions opt_;
  GuardOptions guard_;  // set in the constructor, then only read
  UniqueFd listening_, epoll_, wake_;
  Router router_;
  std::vector<std::function<bool(std::string_view, std::string_view)>> long_lived_;
  std::atomic<bool> stopping_{false};

  // The loop thread's alone (see the file comment).
  std::map<uint64_t, std::unique_ptr<HttpConn>> conns_;
  std::map<std::string, size_t> per_peer_;
  std::deque<HttpConn*> waiting_;
  std::vector<uint64_t> dead_;
  size_t live_ = 0, short_running_ = 0, long_running_ = 0;
  uint64_t next_id_ = 2;  // 0: the listening socket, 1: wake_
  std::optional<HttpClock::time_point> accept_paused_until_;

  // Connections handed back by request threads, with whether they stay open.
  Mutex mu_;
  std::vector<std::pair<HttpConn*, bool>> back_ GUARDED_BY(mu_);

  std::thread thread_;
  // Declared last: destroyed first, once every request thread has ended.
  RequestThreads threads_;
};

}  // namespace agentenv::serve
