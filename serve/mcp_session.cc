// One MCP session (serve/mcp_session.h): the JSON-RPC rules, the methods,
// and the threads of the requests in flight.
#include "serve/mcp_session.h"

#include <atomic>
#include <cctype>
#include <cstring>
#include <chrono>
#include <system_error>
#include <thread>

#include "common/text.h"
#include "control/errors.h"
#include "control/ops.h"
#include "serve/environments.h"
#include "serve/mcp_summary.h"

namespace agentenv::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Newest first. structuredContent and outputSchema, which every tool here
// uses, exist since 2025-06-18.
constexpr const char* kProtocols[] = {"2025-11-25", "2025-06-18"};
// MCP's log levels (RFC 5424), least severe first.
constexpr const char* kLogLevels[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};
constexpr size_t kWarning = 3;
// A resource read returns at most this many bytes (base64 grows it by a third).
constexpr size_t kMaxResourceBytes = size_t{8} << 20;
// Progress notifications of one request come at most this often.
constexpr auto kProgressEvery = std::chrono::milliseconds(500);
constexpr const char* kNodeUri = "agentenv://node/";
// An exec session's name over HTTP gets a 13-character prefix (the MCP
// session's); names are at most 64 characters.
constexpr size_t kMaxScopedSession = 51;

std::string NegotiateProtocol(const json& params) {
  std::string asked = params.is_object() && params.contains("protocolVersion") && params["protocolVersion"].is_string()
                          ? params["protocolVersion"].get<std::string>()
                          : "";
  for (const char* v : kProtocols)
    if (asked == v) return asked;
  return kProtocols[0];
}

}  // namespace

bool IsSupportedProtocol(std::string_view version) {
  for (const char* v : kProtocols)
    if (version == v) return true;
  return false;
}

std::string SupportedProtocols() {
  std::string out;
  for (const char* v : kProtocols) out += (out.empty() ? "" : ", ") + std::string(v);
  return out;
}

namespace {

const control::OpSpec* FindTool(const std::string& name) {
  for (const control::OpSpec& op : control::Ops())
    if (op.tool && op.name == name) return &op;
  return nullptr;
}

json Reply(const json& id, json result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

// JSON-RPC 2.0: an error about a message whose id could not be read
// carries "id": null.
json RpcError(const json& id, int code, const std::string& msg) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", msg}}}};
}

json Notification(const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

json ToolList() {
  json tools = json::array();
  for (const control::OpSpec& op : control::Ops()) {
    if (!op.tool) continue;
    // Unknown argument keys are refused (the instructions say so once,
    // instead of "additionalProperties": false in every schema).
    json input = op.input_schema;
    input.erase("additionalProperties");
    tools.push_back({{"name", op.name},
                     {"description", op.description},
                     {"inputSchema", input},
                     {"outputSchema", op.output_schema},
                     // Only what differs from MCP's defaults (not read-only, destructive).
                     {"annotations", !op.writes ? json{{"readOnlyHint", true}} : json{{"destructiveHint", op.destructive}}}});
  }
  return {{"tools", tools}};
}

json TextResult(const std::string& text, bool is_error) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", is_error}};
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(uint8_t(s[i + 1])) && std::isxdigit(uint8_t(s[i + 2]))) {
      out.push_back(char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string MimeFor(const std::string& path, bool text) {
  auto ends = [&](const char* ext) { return path.size() > std::strlen(ext) && path.ends_with(ext); };
  if (ends(".json")) return "application/json";
  if (ends(".html") || ends(".htm")) return "text/html";
  if (ends(".md")) return "text/markdown";
  if (ends(".png")) return "image/png";
  if (ends(".jpg") || ends(".jpeg")) return "image/jpeg";
  if (ends(".gz")) return "application/gzip";
  return text ? "text/plain" : "application/octet-stream";
}

}  // namespace

// A request in flight.
struct McpSession::Call {
  json id;
  std::atomic<bool> cancelled{false};
};

McpSession::McpSession(ToolRunner run, FileReader read, McpOptions opt)
    : run_(std::move(run)), read_(std::move(read)), opt_(opt) {}

McpSession::~McpSession() { Drain(); }

void McpSession::set_session_id(std::string id) {
  MutexLock lock(mu_);
  session_ = std::move(id);
}

void McpSession::set_environment(std::string env) { env_ = std::move(env); }

bool McpSession::initialized() const {
  MutexLock lock(mu_);
  return initialized_;
}

size_t McpSession::in_flight() const {
  MutexLock lock(mu_);
  return running_;
}

void McpSession::set_notifier(Outbox notify) {
  MutexLock lock(mu_);
  notify_ = std::move(notify);
}

void McpSession::NotifyResourcesChanged() {
  Outbox n;
  {
    MutexLock lock(mu_);
    if (!listed_resources_ || !notify_) return;
    n = notify_;
  }
  n(Notification("notifications/resources/list_changed", json::object()));
}

void McpSession::CancelAll() {
  MutexLock lock(mu_);
  for (auto& [k, c] : in_flight_) c->cancelled = true;
}

void McpSession::Drain() {
  MutexLock lock(mu_);
  while (running_ != 0) idle_.wait(lock);
}

void McpSession::Log(size_t level, const std::string& text, const Outbox& out) {
  {
    MutexLock lock(mu_);
    if (level < log_level_) return;
  }
  out(Notification("notifications/message", {{"level", kLogLevels[level]}, {"logger", "agentenv"}, {"data", text}}));
}

void McpSession::HandleText(std::string_view text, const Outbox& out) {
  json msg = json::parse(text, nullptr, false);
  if (msg.is_discarded()) {
    out(RpcError(nullptr, -32700, "parse error: expected one JSON-RPC 2.0 message (a JSON object)"));
    return;
  }
  Handle(msg, out);
}

bool McpSession::Spawn(const json& id, const Outbox& out, std::function<void(std::shared_ptr<Call>, const Outbox&)> fn) {
  auto call = std::make_shared<Call>();
  call->id = id;
  const std::string key = id.dump();
  enum { kTaken, kFull, kIdUsed } slot;
  {
    MutexLock lock(mu_);
    slot = in_flight_.size() >= opt_.max_in_flight ? kFull : !in_flight_.emplace(key, call).second ? kIdUsed : kTaken;
    if (slot == kTaken) ++running_;
  }
  // Answered without mu_ held: an Outbox may hand the session its next message.
  if (slot == kFull) {
    out(RpcError(id, -32000, "server busy: " + std::to_string(opt_.max_in_flight) +
                                 " requests of this session are already running (the limit); wait for a reply "
                                 "before sending more"));
    return false;
  }
  if (slot == kIdUsed) {
    out(RpcError(id, -32600, "invalid request: id " + key + " is already used by a request in flight"));
    return false;
  }
  // Frees the request's slot and id, once: the id may already name a new
  // request of the client's.
  auto release = [this, call, key] {
    MutexLock lock(mu_);
    auto it = in_flight_.find(key);
    if (it != in_flight_.end() && it->second == call) in_flight_.erase(it);
  };
  // The reply (a message that is no notification) frees the slot before
  // it goes out: a client that has read it may send the next at once.
  Outbox reply_out = [out, release](const json& msg) {
    if (msg.is_object() && !msg.contains("method")) release();
    out(msg);
  };
  auto finish = [this, release] {
    release();
    MutexLock lock(mu_);
    if (--running_ == 0) idle_.notify_all();
  };
  try {
    threads_.Run([call, reply_out, fn = std::move(fn), finish] {
      fn(call, reply_out);
      if (call->cancelled) reply_out(nullptr);
      finish();
    });
  } catch (const std::system_error& e) {
    finish();
    out(RpcError(id, -32000, std::string("server busy: cannot start a thread for the request: ") + e.what()));
    return false;
  }
  return true;
}

void McpSession::Handle(const json& msg, const Outbox& out) {
  if (!msg.is_object()) {
    out(RpcError(nullptr, -32600, "invalid request: expected one JSON-RPC object (batches are not supported)"));
    return;
  }
  const bool has_id = msg.contains("id");
  const json id = has_id ? msg["id"] : json(nullptr);
  const bool id_ok = id.is_string() || id.is_number_integer();
  if (!msg.contains("method")) {
    if (msg.contains("result") || msg.contains("error")) return;  // a response: we send no requests
    out(RpcError(id_ok ? id : json(nullptr), -32600, "invalid request: no \"method\""));
    return;
  }
  if (msg.value("jsonrpc", json()) != "2.0") {
    if (has_id) out(RpcError(id_ok ? id : json(nullptr), -32600, "invalid request: \"jsonrpc\": \"2.0\" is required"));
    return;
  }
  if (!msg["method"].is_string()) {
    if (has_id) out(RpcError(id_ok ? id : json(nullptr), -32600, "invalid request: method must be a string"));
    return;
  }
  const std::string method = msg["method"].get<std::string>();
  const json params = msg.contains("params") && msg["params"].is_object() ? msg["params"] : json::object();
  if (msg.contains("params") && !msg["params"].is_object()) {
    if (has_id) out(RpcError(id_ok ? id : json(nullptr), -32602, "invalid params: params must be an object"));
    return;
  }

  if (!has_id) {  // a notification: never answered
    if (method == "notifications/cancelled" && params.contains("requestId")) {
      MutexLock lock(mu_);
      auto it = in_flight_.find(params["requestId"].dump());
      if (it != in_flight_.end()) it->second->cancelled = true;
    }
    return;
  }
  if (!id_ok) {
    out(RpcError(nullptr, -32600, "invalid request: id must be a string or an integer"));
    return;
  }

  if (method == "initialize") {
    {
      MutexLock lock(mu_);
      initialized_ = true;
      if (params.contains("clientInfo") && params["clientInfo"].is_object())
        client_ = snap::CutUtf8(params["clientInfo"].value("name", ""), snap::Provenance::kMaxName);
    }
    out(Reply(id, {{"protocolVersion", NegotiateProtocol(params)},
                   {"capabilities", {{"tools", {{"listChanged", false}}},
                                     {"resources", {{"listChanged", true}, {"subscribe", false}}},
                                     {"logging", json::object()}}},
                   {"serverInfo", {{"name", "agentenv"}, {"version", control::kVersion}}},
                   {"instructions", "A versioned environment: every exec and write_file is a node you can roll back. "
                                    "Work with read_file/write_file/list_dir/search (live tree, or any node with ref=) "
                                    "and exec (one `session` keeps cd and exports). After a mistake: log or "
                                    "file_history, then rollback. Results are short text; structuredContent has the data. "
                                    "Unknown argument keys are refused."}}));
    return;
  }
  if (method == "ping") {
    out(Reply(id, json::object()));
    return;
  }
  if (!initialized()) {
    out(RpcError(id, -32600, "invalid request: send initialize first (" + method + " before the MCP handshake)"));
    return;
  }
  if (method == "tools/list") {
    out(Reply(id, ToolList()));
  } else if (method == "logging/setLevel") {
    std::string level = params.contains("level") && params["level"].is_string() ? params["level"].get<std::string>() : "";
    for (size_t i = 0; i < std::size(kLogLevels); ++i) {
      if (level != kLogLevels[i]) continue;
      {
        MutexLock lock(mu_);
        log_level_ = i;
      }
      out(Reply(id, json::object()));
      return;
    }
    out(RpcError(id, -32602, "invalid params: level must be one of debug, info, notice, warning, error, critical, "
                             "alert, emergency"));
  } else if (method == "tools/call") {
    if (!params.contains("name") || !params["name"].is_string()) {
      out(RpcError(id, -32602, "invalid params: tools/call needs params.name, a string"));
      return;
    }
    if (!FindTool(params["name"].get<std::string>())) {
      out(RpcError(id, -32602, "invalid params: unknown tool '" + params["name"].get<std::string>() + "' (see tools/list)"));
      return;
    }
    Spawn(id, out, [this, params](std::shared_ptr<Call> c, const Outbox& o) { CallTool(c, params, o); });
  } else if (method == "resources/list") {
    Spawn(id, out, [this](std::shared_ptr<Call> c, const Outbox& o) {
      json r = ListResources();
      if (!c->cancelled) o(Reply(c->id, std::move(r)));
    });
  } else if (method == "resources/templates/list") {
    out(Reply(id, {{"resourceTemplates",
                    json::array({{{"uriTemplate", std::string(kNodeUri) + "{ref}/{+path}"},
                                  {"name", "file at a node"},
                                  {"description", "A file as it was at a node (short id, tag, HEAD or HEAD~N), read "
                                                  "without a rollback: text, or base64 for binary content"}},
                                 {{"uriTemplate", std::string(kNodeUri) + "{ref}"},
                                  {"name", "node"},
                                  {"description", "One node's details (as the show tool returns them)"},
                                  {"mimeType", "application/json"}}})}}));
  } else if (method == "resources/read") {
    Spawn(id, out, [this, params](std::shared_ptr<Call> c, const Outbox& o) { ReadResource(c, params, o); });
  } else {
    out(RpcError(id, -32601, "method not found: " + method));
  }
}

void McpSession::CallTool(std::shared_ptr<Call> call, const json& params, const Outbox& out) {
  const std::string name = params["name"].get<std::string>();
  const control::OpSpec* spec = FindTool(name);
  json args = params.contains("arguments") && !params["arguments"].is_null() ? params["arguments"] : json::object();
  if (!args.is_object()) {
    out(Reply(call->id, TextResult("FAILED (invalid): " + name + ": arguments must be an object", true)));
    return;
  }
  for (const auto& req : spec->input_schema.value("required", json::array()))
    if (!args.contains(req.get<std::string>())) {
      out(Reply(call->id, TextResult("FAILED (invalid): " + name + " needs the argument '" + req.get<std::string>() +
                                         "' (see the tool's inputSchema); nothing was done",
                                     true)));
      return;
    }
  if (auto allowed = MayCall(grant_, *spec); !allowed) {
    out(Reply(call->id, TextResult("FAILED (refused): " + allowed.error().message + "; nothing was done", true)));
    return;
  }
  if (auto scoped = ScopeToEnvironment(env_, *spec, &args, !grant_.is_operator); !scoped) {
    out(Reply(call->id, TextResult("FAILED (invalid): " + scoped.error().message + "; nothing was done", true)));
    return;
  }
  json token;
  if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken"))
    token = params["_meta"]["progressToken"];
  const bool exec = name == "exec";
  // MCP collects exec's output into the result; the frames stream it for
  // progress and let a cancelled call stop the command.
  if (exec) {
    if (!args.contains("timeout_s")) args["timeout_s"] = 300;
    if (!args.contains("output_cap")) args["output_cap"] = 65536;
  }
  std::string collected[2];
  uint64_t lines = 0;
  const auto start = Clock::now();
  auto last_progress = start - kProgressEvery;
  // exec: elapsed time and output lines; a transfer (push): each blob as it
  // moves, and always when one finishes.
  auto progress = [&](const std::string& detail, bool force) {
    if (token.is_null()) return;
    auto now = Clock::now();
    if (!force && now - last_progress < kProgressEvery) return;
    last_progress = now;
    double secs = std::chrono::duration<double>(now - start).count();
    char text[200];
    if (detail.empty())
      std::snprintf(text, sizeof text, "%s: %.1f s, %llu output lines", name.c_str(), secs, (unsigned long long)lines);
    else
      std::snprintf(text, sizeof text, "%s: %.1f s, %s", name.c_str(), secs, detail.c_str());
    out(Notification("notifications/progress", {{"progressToken", token}, {"progress", secs}, {"message", text}}));
  };
  control::FrameSink emit = [&](json frame) {
    if (call->cancelled) return false;
    std::string detail;
    bool force = false;
    if (frame.is_object()) {
      std::string kind = frame.value("frame", "");
      int stream = kind == "stdout" ? 0 : kind == "stderr" ? 1 : -1;
      if (stream >= 0) {
        std::string data;
        if (frame.contains("data")) data = frame["data"].get<std::string>();
        else if (auto d = Base64Decode(frame.value("data_b64", ""))) data = std::move(*d);
        for (char ch : data) lines += ch == '\n';
        collected[stream] += data;
      } else if (kind == "progress") {
        force = frame.value("finished", false);
        detail = frame.value("what", "") + " " + std::to_string(frame.value("index", 0)) + "/" +
                 std::to_string(frame.value("count", 0)) + " " + frame.value("digest", "").substr(0, 19) + ": " +
                 (frame.value("skipped", false) ? std::string("already there")
                                                : std::to_string(frame.value("done", 0ull)) + " of " +
                                                      std::to_string(frame.value("total", 0ull)) + " bytes");
      }
    }
    progress(detail, force);
    return true;
  };
  progress("", false);
  control::CallContext ctx = OnEnvironment();
  ctx.emit = emit;
  {
    MutexLock lock(mu_);
    ctx.who = {snap::Origin::kMcp, client_, session_};
    // Over HTTP, processes are the session's own; the operator's token
    // sees every session's.
    ctx.owner = session_;
    ctx.sees_all = session_.empty() || (grant_.is_operator && !grant_.implicit);
  }
  // Exec sessions (cwd, exported variables) are the MCP session's own too:
  // stored under a name prefixed with its id, shown by the name given.
  std::string exec_session;
  if (exec && !ctx.owner.empty() && args.contains("session") && args["session"].is_string() &&
      !args["session"].get<std::string>().empty()) {
    exec_session = args["session"].get<std::string>();
    if (exec_session.size() > kMaxScopedSession) {
      out(Reply(call->id, TextResult("FAILED (invalid): exec: session names are at most " +
                                         std::to_string(kMaxScopedSession) + " characters here; nothing was done", true)));
      return;
    }
    args["session"] = ctx.owner.substr(0, 12) + "." + exec_session;
  }
  Result<json> r = run_(name, args, ctx);
  if (call->cancelled) return;  // MCP: no reply for a cancelled request
  if (!r) {
    // A command that started may have changed files before failing. No
    // structuredContent: it would have to match the tool's outputSchema,
    // which describes success.
    std::string code(control::ErrorCodeName(r.error().code));
    std::string text = r.error().partial
                           ? "FAILED (" + code + "): " + name + " may have partly happened: the command ran but did "
                             "not complete normally; check `status` and `diff` before retrying. Reason: " + r.error().message
                           : "FAILED (" + code + "): " + name + " did not happen; do not assume it did. Reason: " +
                                 r.error().message;
    out(Reply(call->id, TextResult(text, true)));
    return;
  }
  if (exec) {  // as a collecting call returns them
    (*r)["stdout"] = collected[0];
    (*r)["stderr"] = collected[1];
    if (!exec_session.empty() && r->contains("session") && (*r)["session"].is_object())
      (*r)["session"]["id"] = exec_session;
  }
  if (r->is_object() && r->contains("warnings") && (*r)["warnings"].is_array())
    for (const auto& w : (*r)["warnings"])
      if (w.is_string()) Log(kWarning, name + ": " + w.get<std::string>(), out);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  json result = TextResult(SummarizeResult(name, *r, now), false);
  result["structuredContent"] = std::move(*r);
  out(Reply(call->id, std::move(result)));
  if (spec->writes) NotifyResourcesChanged();
}

control::CallContext McpSession::OnEnvironment() const {
  control::CallContext ctx;
  ctx.env = env_;
  ctx.confined = !grant_.is_operator;
  return ctx;
}

json McpSession::ListResources() {
  {
    MutexLock lock(mu_);
    listed_resources_ = true;
  }
  json resources = json::array();
  const control::CallContext ctx = OnEnvironment();
  if (Result<json> tags = run_("tag", json::object(), ctx); tags && tags->contains("tags"))
    for (const auto& t : (*tags)["tags"])
      resources.push_back({{"uri", kNodeUri + t.value("name", "")},
                           {"name", "tag " + t.value("name", "")},
                           {"description", "The node tagged " + t.value("name", "") + " (" + t.value("id", "").substr(0, 12) + ")"},
                           {"mimeType", "application/json"}});
  json log_args = {{"limit", 20}};
  if (!env_.empty()) log_args["workspace"] = env_;
  if (Result<json> log = run_("log", log_args, ctx); log && log->contains("nodes"))
    for (const auto& n : (*log)["nodes"])
      resources.push_back({{"uri", kNodeUri + n.value("short", "")},
                           {"name", n.value("title", "") + " (" + n.value("short", "") + ")"},
                           {"description", "Node " + n.value("short", "") + " of " + n.value("time", "") + ": " +
                                               n.value("title", "") + "; its files are " + kNodeUri +
                                               n.value("short", "") + "/{path}"},
                           {"mimeType", "application/json"}});
  return {{"resources", resources}};
}

void McpSession::ReadResource(std::shared_ptr<Call> call, const json& params, const Outbox& out) {
  std::string uri = params.contains("uri") && params["uri"].is_string() ? params["uri"].get<std::string>() : "";
  if (!uri.starts_with(kNodeUri) || uri.size() == std::strlen(kNodeUri)) {
    out(RpcError(call->id, -32602, "invalid params: uri must be " + std::string(kNodeUri) + "{ref} or " + kNodeUri +
                                       "{ref}/{path} (got '" + uri + "')"));
    return;
  }
  std::string rest = uri.substr(std::strlen(kNodeUri));
  size_t slash = rest.find('/');
  std::string ref = PercentDecode(rest.substr(0, slash));
  std::string path = slash == std::string::npos ? "" : PercentDecode(rest.substr(slash + 1));
  json contents;
  // The node as this session's environment names it, and sees it.
  Result<json> shown = run_("show", {{"ref", ref}}, OnEnvironment());
  if (!shown) {
    out(RpcError(call->id, -32002, "resource not found: " + uri + ": " + shown.error().message));
    return;
  }
  if (path.empty()) {
    contents = {{"uri", uri}, {"mimeType", "application/json"}, {"text", shown->dump(2, ' ', false, json::error_handler_t::replace)}};
  } else {
    Result<std::string> bytes = read_((*shown)["node"].value("id", ref), path, kMaxResourceBytes);
    if (!bytes) {
      int code = bytes.error().code == ErrorCode::kNotFound ? -32002 : -32602;
      out(RpcError(call->id, code, (code == -32002 ? "resource not found: " : "cannot read ") + uri + ": " +
                                       bytes.error().message));
      return;
    }
    bool tail_ok = false;
    bool text = Utf8Prefix(*bytes, &tail_ok) == bytes->size() && bytes->find('\0') == std::string::npos;
    contents = {{"uri", uri}, {"mimeType", MimeFor(path, text)}};
    if (text) contents["text"] = *bytes;
    else contents["blob"] = Base64Encode(*bytes);
  }
  if (!call->cancelled) out(Reply(call->id, {{"contents", json::array({contents})}}));
}

}  // namespace agentenv::serve
