#include "cli/routed.h"

#include "cli/capture.h"
#include "cli/control_socket.h"
#include "cli/ops.h"

namespace agentenv::cli {
namespace {

using json = nlohmann::json;

struct LockedVerb {
  const char* verb;
  LockedFn fn;
};

constexpr LockedVerb kVerbs[] = {
    {"snap", SnapLocked},     {"restore", RestoreLocked}, {"tag", TagLocked},   {"retain", RetainLocked},
    {"gc", GcLocked},         {"status", StatusLocked},   {"diff", DiffLocked}, {"import", ImportLocked},
};
constexpr std::string_view kCliPrefix = "cli.";

LockedFn Find(std::string_view verb) {
  for (const auto& v : kVerbs)
    if (verb == v.verb) return v.fn;
  return nullptr;
}

// The daemon's response when one answered; nullopt when none listens on
// the socket (no socket, a dead daemon's socket, a path too long to bind).
Result<std::optional<json>> AskDaemon(const std::string& root, const std::string& op, const json& args) {
  Result<json> resp = CallDaemon(SocketPath(root), op, args);
  if (!resp) {
    // Connect reports kNotFound for nobody listening and kInvalid for an
    // unusable path; anything else happened after a daemon answered.
    if (resp.error().code == ErrorCode::kNotFound || resp.error().code == ErrorCode::kInvalid)
      return std::optional<json>();
    return Unexpected<Error>(resp.error());
  }
  return std::optional<json>(std::move(*resp));
}

}  // namespace

Error ErrorFromResponse(const json& error) {
  std::string code = error.is_object() ? error.value("code", "io") : "io";
  ErrorCode c = code == "invalid" ? ErrorCode::kInvalid : code == "not_found" ? ErrorCode::kNotFound
              : code == "busy" ? ErrorCode::kBusy : code == "corrupt" ? ErrorCode::kCorrupt
              : code == "exists" ? ErrorCode::kExists : code == "unsupported" ? ErrorCode::kUnsupported
              : ErrorCode::kIo;
  return Error{error.is_object() ? error.value("message", "daemon error") : "daemon error", 0, c};
}

Result<Reply> CallLocked(const Globals& g, const std::string& verb, const json& args, snap::Repo* open) {
  LockedFn fn = Find(verb);
  if (!fn) return Fail(ErrorCode::kInvalid, "no locked command '" + verb + "'");
  AE_ASSIGN(std::optional<json> resp, AskDaemon(g.root, std::string(kCliPrefix) + verb, args));
  if (resp) {
    if (!resp->value("ok", false)) return Unexpected<Error>(ErrorFromResponse((*resp)["error"]));
    const json& r = (*resp)["result"];
    if (!r.is_object() || !r.contains("json") || !r.value("text", json()).is_string())
      return Fail(ErrorCode::kCorrupt, SocketPath(g.root) + ": malformed reply to " + verb);
    return Reply{r["json"], r["text"].get<std::string>()};
  }
  if (open) return fn(*open, args);
  AE_ASSIGN(auto repo, OpenRepo(g));
  return fn(*repo, args);
}

int RunLocked(const Globals& g, const std::string& verb, const json& args) {
  Result<Reply> r = CallLocked(g, verb, args);
  if (!r) return ReportError(g, r.error());
  return ReportOk(g, std::move(r->json), r->text);
}

Result<json> RunOpAnywhere(const std::string& root, snap::Repo& repo, const std::string& op, const json& args) {
  AE_ASSIGN(std::optional<json> resp, AskDaemon(root, op, args));
  if (!resp) return RunOp(repo, op, args);
  if (!resp->value("ok", false)) return Unexpected<Error>(ErrorFromResponse((*resp)["error"]));
  return (*resp)["result"];
}

Result<json> ServeRequest(snap::Repo& repo, const std::string& op, const json& args, const OpFrameSink& emit) {
  if (op.rfind(kCliPrefix, 0) != 0) return RunOpStream(repo, op, args, emit);
  std::string verb = op.substr(kCliPrefix.size());
  LockedFn fn = Find(verb);
  if (!fn) return Fail(ErrorCode::kInvalid, "unknown command '" + verb + "'");
  DaemonLog("client: " + verb);
  // Like every writer of this process (ops, exec, capture): a running
  // exec's changes stay in its own node.
  std::lock_guard writer(WriterMutex());
  try {
    AE_ASSIGN(Reply r, fn(repo, args));
    return json{{"json", std::move(r.json)}, {"text", std::move(r.text)}};
  } catch (const json::exception& x) {
    return Fail(ErrorCode::kInvalid, verb + ": bad arguments (" + x.what() + ")");
  }
}

}  // namespace agentenv::cli
