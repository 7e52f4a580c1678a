// watch/debounce: the timing rule on synthetic clocks, then the Watcher
// thread on real files.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/testutil.h"
#include "watch/debounce.h"

namespace fs = std::filesystem;
using namespace agentenv::watch;
using namespace std::chrono_literals;
using agentenv::test::TempDir;

namespace {

ChangeSet One(const std::string& path) {
  ChangeSet cs;
  cs.Add(path, Scope::kEntry);
  return cs;
}

// Collects deliveries from the watcher thread.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<Clock::time_point, ChangeSet>> got;

  Watcher::Callback Callback() {
    return [this](ChangeSet cs) {
      std::lock_guard lock(mu);
      got.emplace_back(Clock::now(), std::move(cs));
      cv.notify_all();
    };
  }
  size_t WaitFor(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, timeout, [&] { return got.size() >= n; });
    return got.size();
  }
  size_t size() {
    std::lock_guard lock(mu);
    return got.size();
  }
};

std::unique_ptr<Watcher> StartWatcher(const fs::path& root, DebounceTiming timing, Inbox& in) {
  WatcherOptions opts;
  opts.timing = timing;
  auto w = Watcher::Start(root.string(), opts, in.Callback());
  REQUIRE(w);
  return std::move(w).value();
}

}  // namespace

TEST_CASE("debouncer: quiet period, maximum delay, empty sets") {
  Debouncer d({300ms, 1000ms});
  Clock::time_point t0{};
  CHECK_FALSE(d.Deadline());
  d.Add(ChangeSet(), t0);  // no activity
  CHECK_FALSE(d.pending());

  d.Add(One("a"), t0);
  d.Add(One("b"), t0 + 100ms);
  REQUIRE(d.Deadline());
  CHECK(*d.Deadline() == t0 + 400ms);
  CHECK_FALSE(d.Due(t0 + 399ms));
  CHECK(d.Due(t0 + 400ms));
  ChangeSet got = d.Take();
  CHECK(got.paths.size() == 2);
  CHECK_FALSE(d.pending());

  // Activity every 50 ms never leaves a quiet gap: max_delay decides.
  for (int i = 0; i <= 40; ++i) d.Add(One("f"), t0 + i * 50ms);
  CHECK(*d.Deadline() == t0 + 1000ms);
}

TEST_CASE("watcher: a burst becomes one delivery after the quiet period") {
  TempDir t;
  Inbox in;
  auto w = StartWatcher(t.path(), {200ms, 3000ms}, in);
  auto start = Clock::now();
  for (int i = 0; i < 50; ++i) std::ofstream(t / ("f" + std::to_string(i))) << i;
  REQUIRE(in.WaitFor(1, 3s) == 1);
  std::this_thread::sleep_for(400ms);  // no second delivery follows
  CHECK(in.size() == 1);
  std::lock_guard lock(in.mu);
  auto& [when, cs] = in.got[0];
  CHECK(when - start >= 200ms);
  CHECK(cs.paths.size() == 50);
}

TEST_CASE("watcher: continuous writes are delivered by max_delay before they stop") {
  TempDir t;
  Inbox in;
  auto w = StartWatcher(t.path(), {300ms, 1000ms}, in);
  auto start = Clock::now();
  auto stop_at = start + 2s;
  int n = 0;
  while (Clock::now() < stop_at) {
    std::ofstream(t / "log", std::ios::app) << "line " << n++ << "\n";
    std::this_thread::sleep_for(50ms);
  }
  auto stopped = Clock::now();
  in.WaitFor(100, 600ms);  // the tail after the last write
  std::lock_guard lock(in.mu);
  size_t before_stop = 0;
  for (auto& [when, cs] : in.got) {
    if (when < stopped) ++before_stop;
    CHECK(cs.paths.count("log"));
  }
  CHECK(before_stop >= 1);
  REQUIRE_FALSE(in.got.empty());
  CHECK(in.got[0].first - start < 1500ms);  // max_delay plus scheduling slack
}

TEST_CASE("watcher: Flush delivers now, Stop(true) delivers pending, destruction drops") {
  TempDir t;
  Inbox in;
  auto w = StartWatcher(t.path(), {10s, 60s}, in);
  std::ofstream(t / "a") << "a";
  w->Flush();
  REQUIRE(in.size() == 1);
  CHECK(in.got[0].second.paths.count("a"));
  w->Flush();  // nothing pending: no empty delivery
  CHECK(in.size() == 1);

  std::ofstream(t / "b") << "b";
  w->Stop();
  REQUIRE(in.size() == 2);
  CHECK(in.got[1].second.paths.count("b"));
  w->Stop();  // idempotent
  w->Flush();  // stopped: returns at once

  auto w2 = StartWatcher(t.path(), {10s, 60s}, in);
  std::ofstream(t / "c") << "c";
  std::this_thread::sleep_for(100ms);
  w2.reset();
  CHECK(in.size() == 2);
}

TEST_CASE("watcher: start fails on a missing root with the path in the message") {
  Inbox in;
  auto w = Watcher::Start("/nonexistent/agentenv-watch", {}, in.Callback());
  REQUIRE_FALSE(w);
  CHECK(w.error().message.find("/nonexistent/agentenv-watch") == 0);
  CHECK(w.error().errno_value == ENOENT);
}
