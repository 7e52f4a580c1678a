// One MCP session, independent of its transport (stdio in serve/mcp.cc,
// Streamable HTTP in serve/http.cc): JSON-RPC 2.0 as written, the
// lifecycle (initialize first), tools (the operations of control/ops.h),
// resources (nodes and their files), logging, progress and cancellation.
//
// Concurrency: Handle returns at once. Cheap requests (initialize, ping,
// tools/list, logging/setLevel) are answered before it returns; tool calls
// and resource reads run on their own threads (RequestThreads: reused), at
// most max_in_flight at a time per session (past that a request gets a
// JSON-RPC error at once), so a ping is answered while an exec runs. Replies may come out of order;
// the client matches them by id. Writers among the tools serialize where
// they run (the repository's writer mutex or the daemon).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/result.h"
#include "control/browse.h"
#include "control/files.h"
#include "control/frames.h"
#include "serve/grants.h"
#include "serve/request_threads.h"

namespace agentenv::serve {

// Runs one operation (a tool) with JSON arguments; frames (exec's output)
// go to `emit`, whose false answer (also to a null probe) means the
// request was cancelled: the operation stops its command. Thread-safe.
using ToolRunner = std::function<Result<nlohmann::json>(const std::string& op, const nlohmann::json& args,
                                                        const control::CallContext& call)>;
// Reads the regular file `path` of node `ref` (at most `limit` bytes; more
// is kInvalid). Thread-safe. Errors: kNotFound, kInvalid, I/O.
using FileReader = std::function<Result<std::string>(const std::string& ref, const std::string& path, size_t limit)>;
// A FileReader over control::ReadNodeFile on `at` (a Client or a Server,
// which must outlive it): symlinks are followed inside the node's tree.
template <class At>
FileReader NodeFileReader(At& at) {
  return [&at](const std::string& ref, const std::string& path, size_t limit) -> Result<std::string> {
    return control::ReadNodeFile(at, ref, path, limit);
  };
}

// Where the messages about one request go (its reply, its progress and
// log notifications), or the session's own notifications. Called from any
// thread; the transport serializes its writes. A null message says that
// the request ended without a reply (it was cancelled): a transport that
// holds a stream open for the reply (HTTP) closes it; stdio ignores it.
using Outbox = std::function<void(const nlohmann::json& msg)>;

// Whether `version` is an MCP protocol version this server speaks, and
// their list ("2025-11-25, 2025-06-18") for a message.
bool IsSupportedProtocol(std::string_view version);
std::string SupportedProtocols();

struct McpOptions {
  size_t max_in_flight = 16;  // tool calls and reads running at once
};

class McpSession {
 public:
  McpSession(ToolRunner run, FileReader read, McpOptions opt = {});
  // Waits for every request in flight (their replies still go out).
  ~McpSession();

  // The id its transport gives this session (Mcp-Session-Id), recorded as
  // who asked in what its tool calls make. Thread-safe.
  void set_session_id(std::string id);
  // The environment this session serves (serve/environments.h): "" the
  // live tree, else a workspace its tools act on by default. Set before
  // the first request.
  void set_environment(std::string env);
  const std::string& environment() const { return env_; }
  // What its client may do (serve/grants.h); the operator's by default.
  // Set before the first request.
  void set_grant(Grant grant) { grant_ = std::move(grant); }
  const Grant& grant() const { return grant_; }
  // Parses one message (a stdio line, an HTTP body) and handles it; a
  // parse error is answered with id null.
  void HandleText(std::string_view text, const Outbox& out);
  // Handles one message. A request's messages go to `out`, later and from
  // another thread for tool calls and resource reads.
  void Handle(const nlohmann::json& msg, const Outbox& out);
  // Where notifications that belong to no request go (a new node for
  // resources/list); none by default.
  void set_notifier(Outbox notify);
  // Announces that history changed (resources/list_changed), when the
  // client listed resources.
  void NotifyResourcesChanged();

  bool initialized() const;
  size_t in_flight() const;
  // Marks every request in flight cancelled (the transport closed).
  void CancelAll();
  // Blocks until no request is in flight.
  void Drain();

 private:
  struct Call;
  void CallTool(std::shared_ptr<Call> call, const nlohmann::json& params, const Outbox& out);
  void ReadResource(std::shared_ptr<Call> call, const nlohmann::json& params, const Outbox& out);
  nlohmann::json ListResources();
  // A call on this session's environment, as its grant sees it
  // (control/confine.h).
  control::CallContext OnEnvironment() const;
  // Registers `id` and runs fn on its own thread with the Outbox its
  // messages go to (the reply frees the id's slot before it goes out);
  // false (and an error sent) past the limit or for an id already in flight.
  bool Spawn(const nlohmann::json& id, const Outbox& out,
             std::function<void(std::shared_ptr<Call>, const Outbox&)> fn);
  void Log(size_t level, const std::string& text, const Outbox& out);

  ToolRunner run_;
  FileReader read_;
  McpOptions opt_;
  std::string env_;  // set before any request, read-only after
  Grant grant_{true};  // likewise
  // mu_ guards everything below; never held while calling run_, read_ or
  // an Outbox.
  mutable Mutex mu_;
  CondVar idle_;
  bool initialized_ GUARDED_BY(mu_) = false;
  std::string client_ GUARDED_BY(mu_);   // clientInfo.name from initialize
  std::string session_ GUARDED_BY(mu_);  // the transport's session id (Streamable HTTP), if any
  bool listed_resources_ GUARDED_BY(mu_) = false;
  size_t log_level_ GUARDED_BY(mu_) = 3;  // index into kLogLevels (mcp_session.cc): warning and worse by default
  Outbox notify_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Call>> in_flight_ GUARDED_BY(mu_);  // by id.dump(), until the reply
  size_t running_ GUARDED_BY(mu_) = 0;  // requests not finished (their reply may be going out)
  // Runs tool calls and resource reads; declared last, so it ends first,
  // after Drain (nothing runs then).
  RequestThreads threads_;
};

}  // namespace agentenv::serve
