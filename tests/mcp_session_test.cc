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
