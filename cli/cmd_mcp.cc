// agentenv mcp: a Model Context Protocol server over stdio (JSON-RPC 2.0,
// one message per line). Tools are the control-plane ops (cli/ops.h).
#include <iostream>
#include <string>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/control_socket.h"
#include "cli/ops.h"

namespace agentenv::cli {
namespace {

using json = nlohmann::json;
constexpr const char* kProtocol = "2025-11-25";

json RpcError(const json& id, int code, const std::string& msg) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", msg}}}};
}

json ToolList() {
  json tools = json::array();
  for (const OpSpec& op : Ops()) {
    tools.push_back({{"name", op.name},
                     {"description", op.description},
                     {"inputSchema", op.input_schema},
                     {"outputSchema", op.output_schema},
                     {"annotations", {{"readOnlyHint", !op.writes},
                                     {"destructiveHint", op.name == "rollback" || op.name == "kill" || op.name == "exec"}}}});
  }
  return {{"tools", tools}};
}

json CallTool(snap::Repo& repo, const json& params) {
  std::string name = params.value("name", "");
  json args = params.contains("arguments") ? params["arguments"] : json::object();
  if (args.is_null()) args = json::object();
  Result<json> r = RunOp(repo, name, args);
  if (!r) {
    // A command that started may have changed files before failing.
    bool partial = (name == "exec" || name == "spawn") && r.error().message.rfind("the command ran", 0) == 0;
    std::string text = partial ? "FAILED: " + name + " may have partly happened: the command ran but did not complete "
                                 "normally; check `status` and `diff` before retrying. Reason: " + r.error().message
                               : "FAILED: " + name + " did not happen; do not assume it did. Reason: " + r.error().message;
    return {{"content", json::array({{{"type", "text"}, {"text", text}}})},
            {"structuredContent", {{"error", ErrorJson(r.error())}}},
            {"isError", true}};
  }
  std::string text = r->dump(-1, ' ', false, json::error_handler_t::replace);
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"structuredContent", *r}, {"isError", false}};
}

}  // namespace

int CmdMcp(int argc, char** argv) {
  Globals g;
  CLI::App app{"Serve the repository's tools to a model over MCP (stdio, JSON-RPC 2.0, one message per line)", "mcp"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  std::string line;
  auto send = [](const json& j) {
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
  };
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json msg = json::parse(line, nullptr, false);
    if (msg.is_discarded() || !msg.is_object()) {
      send(RpcError(nullptr, -32700, "parse error: expected one JSON-RPC message per line"));
      continue;
    }
    if (!msg.contains("method")) continue;  // a response to us: we send no requests
    bool is_request = msg.contains("id");
    json id = is_request ? msg["id"] : json(nullptr);
    std::string method = msg["method"].is_string() ? msg["method"].get<std::string>() : "";
    json params = msg.value("params", json::object());
    if (!is_request) continue;  // notifications (initialized, cancelled) need no answer
    if (method == "initialize") {
      send({{"jsonrpc", "2.0"}, {"id", id}, {"result", {
               {"protocolVersion", kProtocol},
               {"capabilities", {{"tools", {{"listChanged", false}}}}},
               {"serverInfo", {{"name", "agentenv"}, {"version", "0.1.0"}}},
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
      send({{"jsonrpc", "2.0"}, {"id", id}, {"result", CallTool(**repo, params)}});
    } else {
      send(RpcError(id, -32601, "method not found: " + method));
    }
  }
  return kExitOk;
}

}  // namespace agentenv::cli
