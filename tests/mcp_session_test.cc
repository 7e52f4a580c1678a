// serve/mcp_session: concurrency rules of one session, in process.
#include "serve/mcp_session.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

using namespace agentenv;
using nlohmann::json;

TEST_CASE("mcp session: a reply frees its slot before it goes out: a request sent on reading it is not busy", "[serve]") {
  serve::McpSession session([](const std::string&, const json&, const control::CallContext&) -> Result<json> {
    return json{{"nodes", json::array()}};
  }, [](const std::string&, const std::string&, size_t) -> Result<std::string> { return std::string(); });
  constexpr int kTotal = 200;
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0, busy = 0;
  std::atomic<int> next{0};
  auto call = [](int id) {
    return json{{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
                {"params", {{"name", "log"}, {"arguments", json::object()}}}};
  };
  serve::Outbox out = [&](const json& msg) {
    if (!msg.is_object() || !msg.contains("id") || msg["id"] == "init") return;
    {
      std::lock_guard lock(mu);
      ++answered;
      if (msg.contains("error")) ++busy;
    }
    cv.notify_all();
    // The next request arrives while this reply is still going out: the
    // tightest a client that waits for replies can be.
    if (int id = next++; id < kTotal) session.Handle(call(id), out);
  };
  session.Handle({{"jsonrpc", "2.0"}, {"id", "init"}, {"method", "initialize"},
                  {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                              {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}},
                 out);
  REQUIRE(session.initialized());
  // All 16 slots busy at once, then one more per reply.
  for (int i = 0; i < 16; ++i)
    if (int id = next++; id < kTotal) session.Handle(call(id), out);
  {
    std::unique_lock lock(mu);
    bool all = cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == kTotal; });
    INFO("answered " << answered << ", busy " << busy);
    REQUIRE(all);
  }
  session.Drain();
  CHECK(busy == 0);
}

namespace {

// Sends initialize then `method` to a session whose tools answer `reply`;
// returns the reply to `method`.
json Ask(const std::string& method, const json& params, json reply) {
  std::mutex mu;
  std::condition_variable cv;
  json answer;
  serve::McpSession session([reply](const std::string&, const json&, const control::CallContext&) -> Result<json> {
    return reply;
  }, [](const std::string&, const std::string&, size_t) -> Result<std::string> { return std::string(); });
  serve::Outbox out = [&](const json& msg) {
    if (!msg.is_object() || msg.value("id", json()) != 2) return;
    std::lock_guard lock(mu);
    answer = msg;
    cv.notify_all();
  };
  session.Handle({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
                  {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                              {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}},
                 out);
  session.Handle({{"jsonrpc", "2.0"}, {"id", 2}, {"method", method}, {"params", params}}, out);
  std::unique_lock lock(mu);
  cv.wait_for(lock, std::chrono::seconds(30), [&] { return !answer.is_null(); });
  return answer;
}

}  // namespace

TEST_CASE("mcp session: the tool list fits 4,000 tokens (characters / 4)", "[serve]") {
  json list = Ask("tools/list", json::object(), json::object());
  REQUIRE(list.contains("result"));
  const size_t chars = list["result"].dump().size();
  INFO(chars << " characters, about " << chars / 4 << " tokens, in " << list["result"]["tools"].size() << " tools");
  CHECK(chars / 4 <= 4000);
  CHECK(list["result"]["tools"].size() >= 25);
}

TEST_CASE("mcp session: every tool and every argument is described, output schemas share the node definition", "[serve]") {
  json list = Ask("tools/list", json::object(), json::object());
  for (const json& t : list["result"]["tools"]) {
    INFO(t["name"]);
    CHECK(t["description"].get<std::string>().size() >= 40);
    for (const auto& [arg, schema] : t["inputSchema"]["properties"].items()) {
      INFO(arg);
      REQUIRE(schema.contains("description"));
      CHECK(schema["description"].get<std::string>().size() >= 8);
    }
    const std::string out = t["outputSchema"].dump();
    CHECK(t["outputSchema"]["type"] == "object");
    // A node is referenced, never spelled out again.
    if (out.find("#/$defs/node") != std::string::npos) CHECK(t["outputSchema"]["$defs"].contains("node"));
    CHECK(out.find("time_ns") == std::string::npos);
  }
}

TEST_CASE("mcp session: a result's text is a short summary, structuredContent keeps the data", "[serve]") {
  json nodes = json::array();
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  for (int i = 0; i < 10; ++i)
    nodes.push_back({{"id", std::string(64, 'a' + i)}, {"short", std::string(12, 'a' + i)}, {"seq", 10 - i},
                     {"time", "2026-01-01 00:00:00.123456789"}, {"time_ns", now - int64_t(i) * 300'000'000'000},
                     {"title", "exec pip install numpy==1." + std::to_string(i)}, {"changes", 120 + i},
                     {"parent", std::string(64, 'b')}, {"damaged", false}, {"head", i == 0}, {"tags", ""}});
  json reply = {{"nodes", nodes}, {"more", true}};
  json call = Ask("tools/call", {{"name", "log"}, {"arguments", json::object()}}, reply);
  REQUIRE(call.contains("result"));
  CHECK(call["result"]["structuredContent"] == reply);
  const std::string text = call["result"]["content"][0]["text"];
  INFO(text);
  CHECK(text.size() / 4 <= 500);  // a default page of log fits 500 tokens
  CHECK(text.find(std::string(12, 'a') + " 0s ago") != std::string::npos);
  CHECK(text.find(std::string(12, 'b') + " 5m ago") != std::string::npos);
  CHECK(text.find(std::string(64, 'a')) == std::string::npos);  // no full ids
  CHECK(text.find("HEAD") != std::string::npos);
  CHECK(text.find("rollback ref=") != std::string::npos);  // the next useful call

  json spawned = Ask("tools/call", {{"name", "spawn"}, {"arguments", {{"command", "x"}}}}, {{"job", 4}, {"pid", 99}, {"log", "/x"}});
  CHECK(spawned["result"]["content"][0]["text"].get<std::string>().find("job_output job=4") != std::string::npos);
}

TEST_CASE("mcp session: an op's progress frames become progress notifications, each finished one sent", "[serve]") {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<json> notes;
  bool replied = false;
  serve::McpSession session([](const std::string&, const json&, const control::CallContext& call) -> Result<json> {
    for (int i = 1; i <= 3; ++i)
      call.emit({{"frame", "progress"}, {"what", "blob"}, {"index", i}, {"count", 3}, {"digest", "sha256:abc"},
                 {"done", 10}, {"total", 10}, {"finished", true}});
    return json{{"created", false}, {"node", nullptr}};
  }, [](const std::string&, const std::string&, size_t) -> Result<std::string> { return std::string(); });
  serve::Outbox out = [&](const json& msg) {
    std::lock_guard lock(mu);
    if (msg.value("method", "") == "notifications/progress") notes.push_back(msg);
    if (msg.value("id", json()) == 2) replied = true;
    cv.notify_all();
  };
  session.Handle({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
                  {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                              {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}},
                 out);
  session.Handle({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"},
                  {"params", {{"name", "snapshot"}, {"arguments", json::object()}, {"_meta", {{"progressToken", 7}}}}}},
                 out);
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return replied; }));
  int finished = 0;
  for (const json& n : notes) {
    CHECK(n["params"]["progressToken"] == 7);
    finished += n["params"]["message"].get<std::string>().find("/3 sha256:abc: 10 of 10 bytes") != std::string::npos;
  }
  CHECK(finished == 3);
}
