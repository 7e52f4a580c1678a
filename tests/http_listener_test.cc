// serve/http.h: the HTTP listener under hostile clients, on loopback: a
// taken port, slow clients that never finish a head, floods of idle
// connections, unread event streams, a second Host header, and the
// round trip of a kept-alive connection.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "serve/http.h"
#include "tests/http_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using Clock = std::chrono::steady_clock;
const std::string kToken = "0123456789abcdef0123456789abcdef";

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
// A bound on a latency: the target on a plain build, scaled for a
// sanitizer's slowdown (testutil.h).
constexpr double Within(double ms) { return ms * kSanitizerSlowdown; }

// A listener with a short route (/ok) and an event stream (/events) that
// stays open until its client leaves or the listener stops.
struct Listener {
  std::atomic<bool> ending{false};
  std::unique_ptr<serve::HttpServer> http;

  explicit Listener(serve::HttpOptions opt = {}) {
    serve::HttpRoutes routes{[this](httplib::Server& svr) {
      svr.Get("/ok", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
      svr.Get("/big", [](const httplib::Request&, httplib::Response& res) {  // 64 MiB, more than a socket holds
        res.set_content_provider(size_t{64} << 20, "application/octet-stream",
                                 [](size_t, size_t length, httplib::DataSink& sink) {
                                   static const std::string chunk(65536, 'x');
                                   return sink.write(chunk.data(), std::min(length, chunk.size()));
                                 });
      });
      svr.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
        res.set_content(std::to_string(req.body.size()), "text/plain");
      });
      svr.Get("/events", [this](const httplib::Request&, httplib::Response& res) {
        res.set_chunked_content_provider("text/event-stream", [this](size_t, httplib::DataSink& sink) {
          if (!sink.write(": hello\n\n", 9)) return false;
          while (!ending && sink.is_writable()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return false;
        });
      });
    }, [](std::string_view method, std::string_view path) { return method == "GET" && path == "/events"; }};
    auto h = serve::HttpServer::Start(opt, {routes});
    REQUIRE(h);
    http = std::move(*h);
  }
  ~Listener() {
    ending = true;
    http->Stop();
  }
  int port() const { return http->port(); }
};

// Connections that send a request head one byte at a time, `every` apart,
// from `from`; they never finish it within the test.
class SlowClients {
 public:
  SlowClients(int port, size_t n, std::chrono::milliseconds every, const char* from) {
    for (size_t i = 0; i < n; ++i)
      if (UniqueFd fd = ConnectFrom(port, from)) fds_.push_back(std::move(fd));
    thread_ = std::thread([this, every] {
      const std::string head = "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + std::string(4096, 'x');
      for (size_t i = 0; !stop_ && i < head.size(); ++i) {
        for (auto& fd : fds_) (void)::send(fd.get(), &head[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (auto t = Clock::now(); !stop_ && Clock::now() - t < every;)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
  }
  size_t opened() const { return fds_.size(); }
  // How many of them the server has closed so far.
  size_t closed() {
    size_t n = 0;
    for (auto& fd : fds_) n += closed_.count(fd.get()) || (ClosedWithin(fd.get(), 0) && closed_.insert(fd.get()).second);
    return n;
  }

 private:
  std::vector<UniqueFd> fds_;
  std::set<int> closed_;  // seen closed (its EOF is read once)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Whether the event stream requested on `fd` started (200) within 2 s.
bool StreamStarted(int fd) {
  pollfd p{fd, POLLIN, 0};
  char buf[512];
  ssize_t n = ::poll(&p, 1, 2000) == 1 ? ::recv(fd, buf, sizeof buf, 0) : 0;
  return n > 0 && std::string(buf, size_t(n)).starts_with("HTTP/1.1 200");
}

// One GET on a new connection from `from`; its status and time.
std::pair<int, double> TimedGet(int port, const std::string& path, const std::string& token = "",
                                const char* from = "127.0.0.1", int timeout_ms = 5000) {
  auto t0 = Clock::now();
  UniqueFd fd = ConnectFrom(port, from);
  if (!fd || !SendAll(fd.get(), GetRequest(path, token))) return {-1, MsSince(t0)};
  RawResponse r = ReadResponse(fd.get(), timeout_ms);
  return {r.status, MsSince(t0)};
}

}  // namespace

TEST_CASE("http listener: a second listener on a taken port is refused as busy", "[http]") {
  Listener first;
  serve::HttpOptions opt;
  opt.port = first.port();
  auto second = serve::HttpServer::Start(opt, {});
  REQUIRE_FALSE(second);
  CHECK(second.error().code == ErrorCode::kBusy);
  CHECK(second.error().message.find("port in use") != std::string::npos);
  // The first still answers every connection (none is handed to another socket).
  for (int i = 0; i < 20; ++i) CHECK(TimedGet(first.port(), "/ok").first == 200);
}

TEST_CASE("http listener: replies on a kept-alive connection are not held back by Nagle", "[http]") {
  Listener l;
  UniqueFd fd = ConnectFrom(l.port());
  REQUIRE(fd);
  constexpr int kRounds = 40;
  auto t0 = Clock::now();
  for (int i = 0; i < kRounds; ++i) {
    REQUIRE(SendAll(fd.get(), GetRequest("/ok")));
    RawResponse r = ReadResponse(fd.get(), 2000);
    REQUIRE(r.status == 200);
    REQUIRE(r.body == "ok");
  }
  double per_round = MsSince(t0) / kRounds;
  WARN("keep-alive round trip: " << per_round << " ms");
  // Nagle plus a delayed ACK costs ~40 ms a reply; a round trip here is well under 1 ms.
  CHECK(per_round < Within(10));
}

TEST_CASE("http listener: a request with two Host headers is refused with 400", "[http]") {
  Listener l;
  UniqueFd fd = ConnectFrom(l.port());
  REQUIRE(SendAll(fd.get(), "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n"));
  RawResponse r = ReadResponse(fd.get(), 2000);
  CHECK(r.status == 400);
  CHECK(r.body.find("Host") != std::string::npos);
  // Nor the other way round.
  UniqueFd fd2 = ConnectFrom(l.port());
  REQUIRE(SendAll(fd2.get(), "GET /ok HTTP/1.1\r\nHost: evil.example\r\nHost: 127.0.0.1\r\n\r\n"));
  CHECK(ReadResponse(fd2.get(), 2000).status == 400);
  CHECK(TimedGet(l.port(), "/ok").first == 200);
}

TEST_CASE("http listener: the Bearer scheme is matched whatever its case", "[http]") {
  CHECK(serve::BearerMatches("Bearer " + kToken, kToken));
  CHECK(serve::BearerMatches("bearer " + kToken, kToken));
  CHECK(serve::BearerMatches("BEARER " + kToken, kToken));
  CHECK_FALSE(serve::BearerMatches("Basic " + kToken, kToken));
  CHECK_FALSE(serve::BearerMatches("bearer " + kToken + "0", kToken));
  CHECK_FALSE(serve::BearerMatches("Bearer", kToken));
  serve::HttpOptions opt;
  opt.token = kToken;
  Listener l(opt);
  UniqueFd fd = ConnectFrom(l.port());
  REQUIRE(SendAll(fd.get(), "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: bearer " + kToken + "\r\n\r\n"));
  CHECK(ReadResponse(fd.get(), 2000).status == 200);
}

TEST_CASE("http listener: 70 slow clients without the token do not delay a request with it", "[http]") {
  serve::HttpOptions opt;
  opt.token = kToken;
  Listener l(opt);
  SlowClients slow(l.port(), 70, std::chrono::milliseconds(1000), "127.0.0.2");
  REQUIRE(slow.opened() == 70);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 5; ++i) {
    auto [status, ms] = TimedGet(l.port(), "/ok", kToken, "127.0.0.1", 3000);
    INFO("request " << i << ": " << status << " in " << ms << " ms");
    CHECK(status == 200);
    CHECK(ms < Within(1000));
  }
  // From the same address as the slow ones, too.
  auto [status, ms] = TimedGet(l.port(), "/ok", kToken, "127.0.0.2", 3000);
  CHECK(status == 200);
  CHECK(ms < Within(1000));
}

TEST_CASE("http listener: with 16 unread event streams and 60 slow clients, 100 concurrent requests are all answered", "[http]") {
  Listener l;
  std::vector<UniqueFd> streams;
  for (int i = 0; i < 16; ++i) {
    streams.push_back(ConnectFrom(l.port()));
    REQUIRE(SendAll(streams.back().get(), GetRequest("/events")));
  }
  SlowClients slow(l.port(), 60, std::chrono::milliseconds(1000), "127.0.0.1");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<std::pair<int, double>> results(100);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i)
    clients.emplace_back([&, i] { results[i] = TimedGet(l.port(), "/ok", "", "127.0.0.1", 5000); });
  for (auto& t : clients) t.join();
  size_t ok = 0;
  double worst = 0;
  for (auto [status, ms] : results) {
    ok += status == 200;
    worst = std::max(worst, ms);
  }
  WARN(ok << " of 100 answered, the slowest in " << worst << " ms");
  CHECK(ok == 100);
  CHECK(worst < Within(2000));
}

TEST_CASE("http listener: a head has one deadline for all of it, however slowly its bytes come", "[http]") {
  serve::HttpOptions opt;
  opt.limits.head_timeout = std::chrono::milliseconds(1000);
  Listener l(opt);
  SlowClients slow(l.port(), 5, std::chrono::milliseconds(100), "127.0.0.2");
  UniqueFd silent = ConnectFrom(l.port(), "127.0.0.3");
  auto t0 = Clock::now();
  // A byte every 100 ms never waits 1 s for a read; the head's deadline still ends it.
  WaitFor([&] { return slow.closed() >= 5; }, 5000);
  const double ms = MsSince(t0);
  CHECK(slow.closed() == 5);
  CHECK(ms > 800);
  CHECK(ms < Within(3000));
  CHECK(ClosedWithin(silent.get(), 2000));  // a connection that sends nothing, too
  CHECK(TimedGet(l.port(), "/ok").first == 200);
}

TEST_CASE("http listener: a kept-alive connection closes after its idle time", "[http]") {
  serve::HttpOptions opt;
  opt.limits.idle_timeout = std::chrono::milliseconds(500);
  Listener l(opt);
  UniqueFd fd = ConnectFrom(l.port());
  REQUIRE(SendAll(fd.get(), GetRequest("/ok")));
  REQUIRE(ReadResponse(fd.get(), 2000).status == 200);
  auto t0 = Clock::now();
  CHECK(ClosedWithin(fd.get(), 3000));
  CHECK(MsSince(t0) > 400);
}

TEST_CASE("http listener: connections are capped per peer, the peer's oldest unserved one makes room", "[http]") {
  serve::HttpOptions opt;
  opt.limits.max_per_peer = 8;
  Listener l(opt);
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(ConnectFrom(l.port(), "127.0.0.2"));
  size_t open = idle.size();
  WaitFor([&] {
    open = 0;
    for (auto& fd : idle) open += !ClosedWithin(fd.get(), 0);
    return open <= 8;
  }, int(Within(3000)));
  CHECK(open == 8);
  CHECK(!ClosedWithin(idle.back().get(), 0));  // the newest stay, the oldest went
  CHECK(TimedGet(l.port(), "/ok", "", "127.0.0.2").first == 200);
  CHECK(TimedGet(l.port(), "/ok", "", "127.0.0.1").first == 200);
}

TEST_CASE("http listener: at the cap in all, the peer with the most connections loses its oldest", "[http]") {
  serve::HttpOptions opt;
  opt.limits.max_connections = 16;
  Listener l(opt);
  UniqueFd other = ConnectFrom(l.port(), "127.0.0.3");  // idle, of a peer with one connection
  std::vector<UniqueFd> flood;
  for (int i = 0; i < 40; ++i) flood.push_back(ConnectFrom(l.port(), "127.0.0.2"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(!ClosedWithin(other.get(), 0));
  auto [status, ms] = TimedGet(l.port(), "/ok", "", "127.0.0.4");
  CHECK(status == 200);
  CHECK(ms < Within(1000));
  REQUIRE(SendAll(other.get(), GetRequest("/ok")));
  CHECK(ReadResponse(other.get(), 2000).status == 200);
}

TEST_CASE("http listener: 200 slow and idle connections open, a good request is answered within 1 s", "[http]") {
  serve::HttpOptions opt;
  opt.token = kToken;
  Listener l(opt);
  const char* peers[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
  std::vector<std::unique_ptr<SlowClients>> slow;
  std::vector<UniqueFd> idle;
  for (const char* p : peers) {
    slow.push_back(std::make_unique<SlowClients>(l.port(), 25, std::chrono::milliseconds(1000), p));
    for (int i = 0; i < 25; ++i) idle.push_back(ConnectFrom(l.port(), p));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    auto [status, ms] = TimedGet(l.port(), "/ok", kToken, "127.0.0.1", 3000);
    CHECK(status == 200);
    worst = std::max(worst, ms);
  }
  WARN("with 200 slow and idle connections open, the slowest of 20 requests took " << worst << " ms");
  CHECK(worst < Within(1000));
  size_t closed = 0;
  for (auto& s : slow) closed += s->closed();
  CHECK(closed == 0);  // under every cap: nobody was cut off
}

TEST_CASE("http listener: a flood of refused requests costs no thread, good requests go on", "[http]") {
  serve::HttpOptions opt;
  opt.token = kToken;
  opt.limits.max_short = 2;
  Listener l(opt);
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < 4; ++t)
    flood.emplace_back([&] {
      UniqueFd fd = ConnectFrom(l.port(), "127.0.0.2");
      while (!stop && fd) {
        if (!SendAll(fd.get(), GetRequest("/ok", "wrong"))) break;
        RawResponse r = ReadResponse(fd.get(), 2000);
        if (r.status != 401) break;
        ++refused;
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 20; ++i) {
    auto [status, ms] = TimedGet(l.port(), "/ok", kToken, "127.0.0.1", 3000);
    CHECK(status == 200);
    CHECK(ms < Within(1000));
  }
  stop = true;
  for (auto& t : flood) t.join();
  CHECK(refused > 20);  // each answered on its kept-alive connection
}

TEST_CASE("http listener: long-lived requests have their own cap, short ones always get a thread", "[http]") {
  serve::HttpOptions opt;
  opt.limits.max_long = 4;
  opt.limits.max_short = 2;
  Listener l(opt);
  std::vector<UniqueFd> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(ConnectFrom(l.port()));
    REQUIRE(SendAll(streams.back().get(), GetRequest("/events")));
    REQUIRE(StreamStarted(streams.back().get()));  // it holds its thread now
  }
  UniqueFd fifth = ConnectFrom(l.port());
  REQUIRE(SendAll(fifth.get(), GetRequest("/events")));
  RawResponse r = ReadResponse(fifth.get(), 2000);
  CHECK(r.status == 503);
  CHECK(r.head.find("Retry-After: 1") != std::string::npos);
  for (int i = 0; i < 10; ++i) CHECK(TimedGet(l.port(), "/ok").first == 200);
  // A stream whose client left frees its place.
  streams.pop_back();
  CHECK(WaitFor([&] {
    UniqueFd again = ConnectFrom(l.port());
    if (!SendAll(again.get(), GetRequest("/events")) || !StreamStarted(again.get())) return false;
    streams.push_back(std::move(again));
    return true;
  }, 2000));
}

TEST_CASE("http listener: stopping ends open event streams at once", "[http]") {
  auto l = std::make_unique<Listener>();
  std::vector<UniqueFd> streams;
  for (int i = 0; i < 16; ++i) {
    streams.push_back(ConnectFrom(l->port()));
    REQUIRE(SendAll(streams.back().get(), GetRequest("/events")));
    REQUIRE(StreamStarted(streams.back().get()));
  }
  auto t0 = Clock::now();
  l->http->Stop();  // the route's own loop is not told: the connection's end tells it
  CHECK(MsSince(t0) < Within(2000));
  for (auto& fd : streams) CHECK(ClosedWithin(fd.get(), 1000));
}

TEST_CASE("http listener: pipelined requests, bodies by length, chunked and past the front's buffer, Expect, no length", "[http]") {
  Listener l;
  UniqueFd fd = ConnectFrom(l.port());
  REQUIRE(SendAll(fd.get(), GetRequest("/ok") + GetRequest("/nosuch") + GetRequest("/ok")));
  CHECK(ReadResponse(fd.get(), 2000).status == 200);
  CHECK(ReadResponse(fd.get(), 2000).status == 404);
  CHECK(ReadResponse(fd.get(), 2000).status == 200);
  auto post = [](const std::string& body, const std::string& extra = "") {
    return "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
           extra + "\r\n" + body;
  };
  REQUIRE(SendAll(fd.get(), post("hello")));
  RawResponse r = ReadResponse(fd.get(), 2000);
  CHECK(r.body == "5");
  const std::string big(200000, 'b');  // read by the request's thread
  REQUIRE(SendAll(fd.get(), post(big)));
  CHECK(ReadResponse(fd.get(), 5000).body == "200000");
  REQUIRE(SendAll(fd.get(), "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  CHECK(ReadResponse(fd.get(), 2000).body == "5");
  // Expect: 100-continue: the head first, the body once "100 Continue" came.
  UniqueFd ex = ConnectFrom(l.port());
  REQUIRE(SendAll(ex.get(), "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  char buf[64];
  pollfd p{ex.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 2000) == 1);
  ssize_t n = ::recv(ex.get(), buf, sizeof buf, 0);
  CHECK(std::string(buf, size_t(std::max<ssize_t>(n, 0))) == "HTTP/1.1 100 Continue\r\n\r\n");
  REQUIRE(SendAll(ex.get(), "abcd"));
  CHECK(ReadResponse(ex.get(), 2000).body == "4");
  // A POST with neither length nor chunks has no body: answered at once.
  UniqueFd none = ConnectFrom(l.port());
  auto t0 = Clock::now();
  REQUIRE(SendAll(none.get(), "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  CHECK(ReadResponse(none.get(), 3000).body == "0");
  CHECK(MsSince(t0) < Within(1000));
}

TEST_CASE("http listener: heads that could be read two ways are refused with 400 and close", "[http]") {
  Listener l;
  for (const std::string head : {
           "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
           "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
           "GET /ok HTTP/1.1\nHost: 127.0.0.1\r\n\r\n",
           "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n",
           "GET /%6fk HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
           "GET http://127.0.0.1/ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
           "GET /ok HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n",
       }) {
    INFO(head);
    UniqueFd fd = ConnectFrom(l.port());
    REQUIRE(SendAll(fd.get(), head));
    RawResponse r = ReadResponse(fd.get(), 2000);
    CHECK(r.status == 400);
    CHECK(r.head.find("Connection: close") != std::string::npos);
  }
  UniqueFd no_host = ConnectFrom(l.port());  // well formed, refused by the guard: the connection stays
  REQUIRE(SendAll(no_host.get(), "GET /ok HTTP/1.1\r\n\r\n"));
  CHECK(ReadResponse(no_host.get(), 2000).status == 400);
  REQUIRE(SendAll(no_host.get(), GetRequest("/ok")));
  CHECK(ReadResponse(no_host.get(), 2000).status == 200);
  UniqueFd big = ConnectFrom(l.port());
  REQUIRE(SendAll(big.get(), "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + std::string(20000, 'x')));
  CHECK(ReadResponse(big.get(), 2000).status == 431);
}

TEST_CASE("http listener: a client that stops reading its reply frees the thread after the write timeout", "[http]") {
  serve::HttpOptions opt;
  opt.limits.max_short = 1;
  opt.limits.write_timeout = std::chrono::milliseconds(500);
  Listener l(opt);
  UniqueFd stalled = ConnectFrom(l.port(), "127.0.0.2");
  REQUIRE(SendAll(stalled.get(), GetRequest("/big")));  // and not read: the socket's buffers fill
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The one short thread is stuck writing until the timeout; then it serves this.
  auto [status, ms] = TimedGet(l.port(), "/ok", "", "127.0.0.1", 5000);
  CHECK(status == 200);
  CHECK(ms < Within(2000));
  CHECK(ClosedWithin(stalled.get(), 5000));  // what was buffered, then the end: not 64 MiB
}

TEST_CASE("http listener: a body the router leaves unread is never taken for the next request", "[http]") {
  Listener l;
  UniqueFd fd = ConnectFrom(l.port());
  const std::string hidden = GetRequest("/nosuch");
  REQUIRE(SendAll(fd.get(), "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(hidden.size()) +
                                "\r\n\r\n" + hidden));
  RawResponse r = ReadResponse(fd.get(), 2000);
  CHECK(r.status == 200);
  CHECK(r.head.find("Connection: close") != std::string::npos);
  CHECK(ReadResponse(fd.get(), 1000).status == -1);  // no 404 for the body
}

}  // namespace agentenv::test
