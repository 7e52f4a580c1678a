// An MCP client over Streamable HTTP for tests, and the port a serving
// process logged.
#pragma once

#include <httplib.h>

#include <regex>
#include <sstream>
#include <string>

#include "tests/cli_testutil.h"

namespace agentenv::test {

// The port of the MCP listener that `daemon --listen HOST:0` (or `serve`)
// wrote to its log at `log_file`; 0 when none appears within 10 s.
inline int ListenPort(const fs::path& log_file) {
  int port = 0;
  WaitFor([&] {
    std::smatch m;
    std::string log = ReadFile(log_file);
    if (std::regex_search(log, m, std::regex(R"(serving MCP at http://[^:]+:(\d+)/mcp)"))) port = std::stoi(m[1]);
    return port > 0;
  }, 10000);
  return port;
}

// An MCP session over Streamable HTTP (one connection per request, as
// concurrent requests need).
class HttpMcp {
 public:
  // `path`: the endpoint (/mcp, the live tree's, or /w/NAME/mcp).
  HttpMcp(int port, httplib::Headers extra = {}, std::string path = "/mcp")
      : port_(port), extra_(std::move(extra)), path_(std::move(path)) {}
  httplib::Result Post(const json& msg, httplib::Headers headers = {}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    headers.insert(extra_.begin(), extra_.end());
    headers.emplace("Accept", "application/json, text/event-stream");
    if (!session_.empty()) headers.emplace("Mcp-Session-Id", session_);
    return c.Post(path_.c_str(), headers, msg.dump(), "application/json");
  }
  // The reply to a request (from a JSON body or the last SSE event).
  json Request(const std::string& method, const json& params) {
    auto r = Post({{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}});
    if (!r || r->status != 200) return json();
    if (r->get_header_value("Content-Type").starts_with("application/json")) return json::parse(r->body, nullptr, false);
    json last;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);)
      if (line.starts_with("data: ")) last = json::parse(line.substr(6), nullptr, false);
    return last;
  }
  const std::string& session() const { return session_; }
  // A tool call's result (structuredContent, or the whole reply when the
  // call failed: result.isError and its text).
  json Tool(const std::string& name, const json& args) {
    json r = Request("tools/call", {{"name", name}, {"arguments", args}});
    if (r.contains("result") && r["result"].contains("structuredContent")) return r["result"]["structuredContent"];
    return r;
  }
  bool Initialize() {
    auto r = Post({{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", "initialize"},
                   {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                               {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}});
    if (!r || r->status != 200) return false;
    session_ = r->get_header_value("Mcp-Session-Id");
    return !session_.empty();
  }

 private:
  int port_;
  httplib::Headers extra_;
  std::string path_;
  std::string session_;
  int id_ = 0;
};

}  // namespace agentenv::test
