// serve/mcp_http.h on a loopback listener: how sessions are bounded (per
// peer address and in all, never by ending a live one), how idle ones
// expire, and what a client hears about a session that is gone.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <thread>

#include "serve/http.h"
#include "serve/mcp_http.h"
#include "tests/http_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using json = nlohmann::json;

struct Endpoint {
  std::unique_ptr<serve::McpHttpEndpoint> mcp;
  std::unique_ptr<serve::HttpServer> http;

  explicit Endpoint(serve::McpHttpOptions opt) {
    serve::ToolRunner run = [](const std::string&, const json&, const control::CallContext&) -> Result<json> {
      return json::object();
    };
    serve::FileReader read = [](const std::string&, const std::string&, size_t) -> Result<std::string> {
      return Fail(ErrorCode::kNotFound, "no files here");
    };
    mcp = std::make_unique<serve::McpHttpEndpoint>(run, read, opt);
    auto h = serve::HttpServer::Start({}, {mcp->Routes()});
    REQUIRE(h);
    http = std::move(*h);
  }
  ~Endpoint() {
    mcp->Stop();
    http->Stop();
  }

  // A POST of `msg` from `from`; the response.
  RawResponse Post(const json& msg, const std::string& session = "", const char* from = "127.0.0.1") {
    UniqueFd fd = ConnectFrom(http->port(), from);
    const std::string body = msg.dump();
    std::string req = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Accept: application/json, text/event-stream\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n" +
                      (session.empty() ? "" : "Mcp-Session-Id: " + session + "\r\n") + "\r\n" + body;
    REQUIRE(SendAll(fd.get(), req));
    return ReadResponse(fd.get(), 5000);
  }
  // A new session's id from `from`, or "" with *status set.
  std::string Initialize(const char* from = "127.0.0.1", int* status = nullptr, std::string* body = nullptr) {
    RawResponse r = Post({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
                          {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}},
                         "", from);
    if (status) *status = r.status;
    if (body) *body = r.body;
    const size_t at = r.head.find("Mcp-Session-Id: ");
    if (r.status != 200 || at == std::string::npos) return "";
    return r.head.substr(at + 16, r.head.find("\r\n", at) - at - 16);
  }
  int Ping(const std::string& session, std::string* body = nullptr, const char* from = "127.0.0.1") {
    RawResponse r = Post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}}, session, from);
    if (body) *body = r.body;
    return r.status;
  }
};

}  // namespace

TEST_CASE("mcp http: sessions are bounded per peer, the bound refuses the newer and never ends an older", "[mcp][http]") {
  serve::McpHttpOptions opt;
  opt.max_sessions_per_peer = 4;
  opt.max_sessions = 6;
  Endpoint e(opt);
  std::vector<std::string> mine;
  for (int i = 0; i < 4; ++i) mine.push_back(e.Initialize("127.0.0.2"));
  for (const auto& s : mine) REQUIRE(!s.empty());
  int status = 0;
  std::string body;
  CHECK(e.Initialize("127.0.0.2", &status, &body).empty());
  CHECK(status == 503);
  CHECK(body.find("too many sessions open from 127.0.0.2") != std::string::npos);
  // Another peer is not refused for this one's sessions, up to the bound in all.
  CHECK(!e.Initialize("127.0.0.3").empty());
  CHECK(!e.Initialize("127.0.0.3").empty());
  CHECK(e.Initialize("127.0.0.4", &status, &body).empty());
  CHECK(status == 503);
  CHECK(body.find("too many sessions open (6)") != std::string::npos);
  for (const auto& s : mine) CHECK(e.Ping(s) == 200);
  CHECK(e.mcp->sessions() == 6);
}

TEST_CASE("mcp http: a session idle past its time ends, says so, and makes room", "[mcp][http]") {
  serve::McpHttpOptions opt;
  opt.max_sessions_per_peer = 1;
  const int k = kSanitizerSlowdown;  // a sanitizer's slower requests still come well within the idle time
  opt.idle_ttl = std::chrono::milliseconds(300 * k);
  Endpoint e(opt);
  std::string old = e.Initialize();
  REQUIRE(!old.empty());
  int status = 0;
  CHECK(e.Initialize("127.0.0.1", &status).empty());
  CHECK(status == 503);
  // A session in use does not expire.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150 * k));
    CHECK(e.Ping(old) == 200);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(450 * k));
  std::string fresh = e.Initialize();
  CHECK(!fresh.empty());
  std::string body;
  CHECK(e.Ping(old, &body) == 404);
  CHECK(body.find("ended (idle for more than " + std::to_string(300 * k) + " ms)") != std::string::npos);
  CHECK(e.Ping("0123456789abcdef0123456789abcdef", &body) == 404);
  CHECK(body.find("unknown") != std::string::npos);
}

}  // namespace agentenv::test
