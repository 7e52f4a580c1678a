// MCP (serve/mcp_session.cc): the input is what an MCP client writes to
// `agentenv mcp`, one JSON-RPC message per line, each handed to an
// McpSession as the stdio transport hands it (blank lines skipped). Its
// tool calls run CallJson in this process (fuzz_ops.h: read-only
// operations run, the others only have their arguments read), and its
// resource reads read files of the small history. The daemon socket
// between the two is the socket target's (a connection and a thread per
// input cost 6 ms here, most of this target's time). Every output message
// must be one JSON-RPC 2.0 response (id null only for an error about an
// unreadable message) or a notification, at most one response per input
// line.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "control/open_repo.h"
#include "serve/mcp_session.h"
#include "fuzz/fuzz_env.h"
#include "fuzz/fuzz_ops.h"
#include "fuzz/fuzz_repo.h"

namespace {

using namespace agentenv;
using control::json;

std::unique_ptr<control::Server> server;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::ConfineWrites(*argc, *argv);
  std::string root = fuzz::WorkDir() + "/repo";
  fuzz::MakeRepository(root);
  auto repo = control::OpenRepo(root);
  if (!repo) fuzz::Die(repo.error().message);
  server = std::make_unique<control::Server>(std::move(*repo));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The handshake first, as a client does: nothing but ping is served
  // before it, and the corpus is mostly what comes after.
  std::string text = R"({"jsonrpc":"2.0","id":"fuzz-init","method":"initialize","params":{}})" "\n" +
                     std::string(reinterpret_cast<const char*>(data), size);
  std::mutex mu;
  std::vector<std::string> sent;  // what the transport would write, one message each
  serve::Outbox send = [&](const json& j) {
    if (j.is_null()) return;  // a request ended without a reply
    std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace);
    std::lock_guard lock(mu);
    sent.push_back(std::move(line));
  };
  {
    serve::McpSession session(
        [](const std::string& op, const json& args, const control::CallContext& call) {
          return fuzz::GuardedCall(*server, op, args, call.emit);
        },
        serve::NodeFileReader(*server));
    session.set_notifier(send);
    std::string_view rest = text;
    while (!rest.empty()) {
      size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      session.HandleText(line, send);
    }
    session.Drain();
  }
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  size_t replies = 0;
  for (const std::string& line : sent) {
    ++replies;
    // The tool list (some 20 KB, the same every time) is only framed:
    // parsing it on every input was most of this target's time.
    if (line.size() > 8192) {
      FUZZ_CHECK(line.starts_with("{\"id\":") && line.back() == '}', "a long line that is no JSON object");
      continue;
    }
    auto j = json::parse(line, nullptr, false);
    FUZZ_CHECK(j.is_object() && j.value("jsonrpc", json()) == json("2.0"), "not a JSON-RPC 2.0 object: " + line);
    if (j.contains("method")) {  // a notification (a log message, list_changed)
      FUZZ_CHECK(j["method"].is_string() && !j.contains("id"), "a bad notification: " + line);
      --replies;
      continue;
    }
    FUZZ_CHECK(j.contains("result") != j.contains("error"), "neither or both of result and error: " + line);
    FUZZ_CHECK(j.contains("id"), "a response without id: " + line);
    FUZZ_CHECK(j["id"].is_string() || j["id"].is_number_integer() || (j["id"].is_null() && j.contains("error")),
               "a bad id: " + line);
  }
  FUZZ_CHECK(replies <= lines, std::to_string(lines) + " lines got " + std::to_string(replies) + " replies");
  return 0;
}
