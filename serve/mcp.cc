// The MCP adapter (control/mcp.h): JSON-RPC 2.0 over stdio, one message
// per line; the tools are the operations of control/ops.h.
#include "serve/mcp.h"


#include <iostream>
#include <string>

#include "control/client.h"
#include "control/daemon_call.h"
#include "control/errors.h"
#include "control/ops.h"

namespace agentenv::serve {

using json = nlohmann::json;

namespace {

// Newest first. structuredContent and outputSchema, which every tool here
// uses, exist since 2025-06-18.
constexpr const char* kProtocols[] = {"2025-11-25", "2025-06-18"};

// The client's version when we speak it, else our newest (the client then
// decides whether to go on).
std::string NegotiateProtocol(const json& params) {
  std::string asked = params.is_object() && params.contains("protocolVersion") && params["protocolVersion"].is_string()
                          ? params["protocolVersion"].get<std::string>()
                          : "";
  for (const char* v : kProtocols)
    if (asked == v) return asked;
  return kProtocols[0];
}

bool KnownTool(const std::string& name) {
  for (const control::OpSpec& op : control::Ops())
    if (op.tool && op.name == name) return true;
  return false;
}

// MCP's schema has no null ids: an error about a message whose id is
// unknown (unparsable, not an object) carries no id at all.
json RpcError(const json& id, int code, const std::string& msg) {
  json j = {{"jsonrpc", "2.0"}, {"error", {{"code", code}, {"message", msg}}}};
  if (!id.is_null()) j["id"] = id;
  return j;
}

json ToolList() {
  json tools = json::array();
  for (const control::OpSpec& op : control::Ops()) {
    if (!op.tool) continue;
    tools.push_back({{"name", op.name},
                     {"description", op.description},
                     {"inputSchema", op.input_schema},
                     {"outputSchema", op.output_schema},
                     {"annotations", {{"readOnlyHint", !op.writes},
                                     {"destructiveHint", op.destructive}}}});
  }
  return {{"tools", tools}};
}

json CallTool(control::Client& client, const json& params) {
  std::string name = params.value("name", "");
  json args = params.contains("arguments") ? params["arguments"] : json::object();
  if (args.is_null()) args = json::object();
  Result<json> r = client.CallJson(name, args);  // a daemon holds the lock: it runs the op
  if (!r) {
    // A command that started may have changed files before failing. No
    // structuredContent: it would have to match the tool's outputSchema,
    // which describes success.
    bool partial = r.error().partial;
    std::string code(control::ErrorCodeName(r.error().code));
    std::string text = partial ? "FAILED (" + code + "): " + name + " may have partly happened: the command ran but did "
                                 "not complete normally; check `status` and `diff` before retrying. Reason: " + r.error().message
                               : "FAILED (" + code + "): " + name + " did not happen; do not assume it did. Reason: " +
                                     r.error().message;
    return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", true}};
  }
  std::string text = r->dump(-1, ' ', false, json::error_handler_t::replace);
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"structuredContent", *r}, {"isError", false}};
}

// std::getline, bounded: a line over kMaxRequestBytes is read to its end
// but not kept (*too_long). False at the end of input.
bool ReadLine(std::istream& in, std::string* line, bool* too_long) {
  line->clear();
  *too_long = false;
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (int c; (c = sb->sbumpc()) != std::char_traits<char>::eof();) {
    any = true;
    if (c == '\n') return true;
    if (*too_long) continue;
    line->push_back(char(c));
    if (line->size() > control::kMaxRequestBytes) {
      *too_long = true;
      std::string().swap(*line);
    }
  }
  return any;
}

}  // namespace

void ServeMcp(const std::string& root, std::istream& in, std::ostream& out) {
  control::Client client(root);
  std::string line;
  auto send = [&out](const json& j) {
    out << j.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
  };
  bool too_long = false;
  while (ReadLine(in, &line, &too_long)) {
    if (too_long) {
      send(RpcError(nullptr, -32600, "invalid request: a line longer than 16 MiB (the limit) was skipped"));
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json msg = json::parse(line, nullptr, false);
    if (msg.is_discarded()) {
      send(RpcError(nullptr, -32700, "parse error: expected one JSON-RPC message per line"));
      continue;
    }
    if (!msg.is_object()) {
      send(RpcError(nullptr, -32600, "invalid request: expected one JSON-RPC object (batches are not supported)"));
      continue;
    }
    if (!msg.contains("method")) continue;  // a response to us: we send no requests
    bool is_request = msg.contains("id");
    json id = is_request ? msg["id"] : json(nullptr);
    if (!is_request) continue;  // notifications (initialized, cancelled) need no answer
    if (!msg["method"].is_string() || !(id.is_string() || id.is_number_integer())) {
      send(RpcError(id.is_string() || id.is_number_integer() ? id : json(nullptr), -32600,
                    "invalid request: method must be a string and id a string or integer"));
      continue;
    }
    std::string method = msg["method"].get<std::string>();
    json params = msg.value("params", json::object());
    if (method == "initialize") {
      send({{"jsonrpc", "2.0"}, {"id", id}, {"result", {
               {"protocolVersion", NegotiateProtocol(params)},
               {"capabilities", {{"tools", {{"listChanged", false}}}}},
               {"serverInfo", {{"name", "agentenv"}, {"version", control::kVersion}}},
               {"instructions", "Tools to run commands in this environment and to snapshot and roll back its "
                                "whole filesystem. `exec` runs a command and snapshots afterwards (use one "
                                "`session` name to keep cd and exported variables between calls). Snapshot "
                                "before risky steps; after a mistake, `log` then `rollback` to the newest good node."}}}});
    } else if (method == "ping") {
      send({{"jsonrpc", "2.0"}, {"id", id}, {"result", json::object()}});
    } else if (method == "tools/list") {
      send({{"jsonrpc", "2.0"}, {"id", id}, {"result", ToolList()}});
    } else if (method == "tools/call") {
      if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
        send(RpcError(id, -32602, "tools/call needs params.name"));
        continue;
      }
      if (!KnownTool(params["name"].get<std::string>())) {
        send(RpcError(id, -32602, "unknown tool: " + params["name"].get<std::string>() + " (see tools/list)"));
        continue;
      }
      send({{"jsonrpc", "2.0"}, {"id", id}, {"result", CallTool(client, params)}});
    } else {
      send(RpcError(id, -32601, "method not found: " + method));
    }
  }
}

}  // namespace agentenv::serve
