// The daemon's control socket: newline-delimited JSON over a unix stream
// socket at <root>/agentenv.sock (mode 0600, peers must have our uid or be
// root). Request: {"id":any,"op":"log","args":{...}}. Response: {"id":...,
// "ok":true,"result":{...}} or {"id":...,"ok":false,"error":{"code","message"}}.
// A streaming op (exec) sends frames {"id":...,"frame":"stdout",...} before
// its response; the response is always the last line for a request.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "control/frames.h"

namespace agentenv::serve {

// Handles one request that may stream frames before its result. Frames
// sent to `emit` get the request's "id" and go to the client ahead of the
// response; a null frame sends nothing and only checks that the client is
// still connected.
using StreamHandler = std::function<Result<nlohmann::json>(const std::string& op, const nlohmann::json& args,
                                                           const control::FrameSink& emit)>;

// Serves the socket until Stop() or destruction: one thread per client,
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
  void Serve(UniqueFd client);

  std::string path_;
  StreamHandler handler_;
  UniqueFd listen_, stop_;
  std::thread acceptor_;
  // Client threads run detached (a long-lived daemon sees many clients);
  // Stop waits until none is left.
  std::mutex mu_;
  std::condition_variable idle_;
  size_t clients_ = 0;
  std::atomic<bool> stopping_{false};
};

}  // namespace agentenv::serve
