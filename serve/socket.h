// The daemon's control socket: newline-delimited JSON over a unix stream
// socket at <root>/agentenv.sock (mode 0600, peers must have our uid or be
// root). Request: {"id":any,"op":"log","args":{...}}. Response: {"id":...,
// "ok":true,"result":{...}} or {"id":...,"ok":false,"error":{"code","message"}}.
// A streaming op (exec) sends frames {"id":...,"frame":"stdout",...} before
// its response; the response is always the last line for a request.
//
// Requests of one connection run concurrently (up to kMaxInFlight; past
// that a request gets a `busy` error at once): a reader never waits behind
// a running exec, writers serialize where they run (the server's writer
// mutex), responses may come out of order and carry their request's id.
// The socket-only op {"op":"cancel","args":{"id":X}} cancels the
// connection's request X: its frame sink answers false from then on, so an
// exec kills its command (what it changed still becomes a node); X's
// response still comes, last.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "control/frames.h"
#include "serve/request_threads.h"

namespace agentenv::serve {

// Handles one request that may stream frames before its result. Frames
// sent to `call.emit` get the request's "id" and go to the client ahead of
// the response; a null frame sends nothing and only checks that the client
// is still connected. `call.stdio` holds the descriptors the request
// passed (SCM_RIGHTS: exec's stdin, stdout, stderr), valid until it returns.
using StreamHandler = std::function<Result<nlohmann::json>(const std::string& op, const nlohmann::json& args,
                                                           const control::CallContext& call)>;

// Requests of one connection running at once.
inline constexpr size_t kMaxInFlight = 16;

// Serves the socket until Stop() or destruction: one reader thread per
// client and one thread per request in flight (RequestThreads: reused),
// many clients at once. A malformed line gets an error response and the
// connection stays open; a line over control::kMaxRequestBytes gets an error
// response and the connection is closed.
class SocketServer {
 public:
  // Binds and listens at `path`; serves nobody until Accept: a client that
  // connects before waits in the backlog. Errors: kBusy when another daemon
  // answers on the socket, I/O.
  static Result<std::unique_ptr<SocketServer>> Listen(const std::string& path, StreamHandler handler);
  // Starts serving clients, each on its own thread. Call once.
  void Accept();
  ~SocketServer();
  void Stop();

 private:
  SocketServer() = default;
  void AcceptLoop();
  struct Connection;
  void Serve(UniqueFd client);
  void Dispatch(const std::shared_ptr<Connection>& conn, nlohmann::json req, std::vector<UniqueFd> fds);

  std::string path_;
  StreamHandler handler_;
  UniqueFd listen_, stop_;
  std::thread acceptor_;
  // Client threads run detached (a long-lived daemon sees many clients);
  // Stop waits until none is left.
  Mutex mu_;
  CondVar idle_;
  size_t clients_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> stopping_{false};
  // Runs the requests of every connection; declared last, so it ends
  // first, after Stop (nothing runs then).
  RequestThreads requests_;
};

}  // namespace agentenv::serve
