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

namespace agentenv::cli {

std::string SocketPath(const std::string& root);

// Handles one request object; returns the result or an error.
using RequestHandler = std::function<Result<nlohmann::json>(const std::string& op, const nlohmann::json& args)>;

// Sends one frame (an object; the server adds the request's "id") to the
// client ahead of the response; false once the client is gone. A null frame
// sends nothing and only checks that the client is still connected.
using FrameSink = std::function<bool(nlohmann::json frame)>;

// Handles one request that may stream frames before its result.
using StreamHandler = std::function<Result<nlohmann::json>(const std::string& op, const nlohmann::json& args,
                                                           const FrameSink& emit)>;

// Serves the socket until Stop() or destruction: one thread per client,
// many clients at once. A malformed line gets an error response and the
// connection stays open.
class ControlServer {
 public:
  // Errors: kBusy when another daemon answers on the socket, I/O.
  static Result<std::unique_ptr<ControlServer>> Start(const std::string& path, RequestHandler handler);
  static Result<std::unique_ptr<ControlServer>> Start(const std::string& path, StreamHandler handler);
  ~ControlServer();
  void Stop();

 private:
  ControlServer() = default;
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

// Sends one request to the daemon at `path` and returns its response
// object. Errors: kNotFound when no daemon listens there, I/O.
Result<nlohmann::json> CallDaemon(const std::string& path, const std::string& op, const nlohmann::json& args);

// Same, handing every frame that precedes the response to on_frame (e.g.
// exec's output as it is produced). Errors as for CallDaemon.
Result<nlohmann::json> CallDaemonStream(const std::string& path, const std::string& op, const nlohmann::json& args,
                                        const std::function<void(const nlohmann::json&)>& on_frame);

// The error JSON of a response for `e`.
nlohmann::json ErrorJson(const Error& e);

}  // namespace agentenv::cli
