// MCP (serve/mcp.cc): the input is what an MCP client writes to
// `agentenv mcp`, one JSON-RPC message per line, served by ServeMcp as the
// command serves it. Its tool calls go, as they do when a daemon serves
// the root, over <root>/agentenv.sock to a SocketServer with CallJson
// behind it (fuzz_ops.h: read-only operations run, the others only have
// their arguments read). Every output line must be one JSON-RPC 2.0
// response, at most one per input line.
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "control/ignore.h"
#include "serve/mcp.h"
#include "serve/socket.h"
#include "fuzz/fuzz_env.h"
#include "fuzz/fuzz_ops.h"
#include "fuzz/fuzz_repo.h"
#include "snap/layout.h"

namespace {

using namespace agentenv;
using control::json;

std::string root;
std::unique_ptr<control::Server> server;
std::unique_ptr<serve::SocketServer> socket_server;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::ConfineWrites(*argc, *argv);
  root = fuzz::WorkDir() + "/repo";
  fuzz::MakeRepository(root);
  auto repo = control::OpenRepo(root);
  if (!repo) fuzz::Die(repo.error().message);
  server = std::make_unique<control::Server>(std::move(*repo));
  auto s = serve::SocketServer::Listen(snap::layout::Socket(root), [](const std::string& op, const json& args,
                                                                      const control::FrameSink& emit) {
    return fuzz::GuardedCall(*server, op, args, emit);
  });
  if (!s) fuzz::Die(s.error().message);
  socket_server = std::move(*s);
  socket_server->Accept();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  std::ostringstream out;
  serve::ServeMcp(root, in, out);
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  size_t replies = 0;
  std::istringstream got(out.str());
  for (std::string line; std::getline(got, line);) {
    ++replies;
    // The tool list (some 20 KB, the same every time) is only framed:
    // parsing it on every input was most of this target's time.
    if (line.size() > 8192) {
      FUZZ_CHECK(line.starts_with("{\"id\":") && line.back() == '}', "a long line that is no JSON object");
      continue;
    }
    auto j = json::parse(line, nullptr, false);
    FUZZ_CHECK(j.is_object() && j.value("jsonrpc", json()) == json("2.0"), "not a JSON-RPC 2.0 object: " + line);
    FUZZ_CHECK(j.contains("result") != j.contains("error"), "neither or both of result and error: " + line);
    if (j.contains("id")) FUZZ_CHECK(j["id"].is_string() || j["id"].is_number_integer(), "a bad id: " + line);
  }
  FUZZ_CHECK(replies <= lines, std::to_string(lines) + " lines got " + std::to_string(replies) + " replies");
  return 0;
}
