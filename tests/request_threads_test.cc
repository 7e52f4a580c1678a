// serve/request_threads: every request runs at once, threads are reused,
// idle ones end, and the destructor waits for what runs.
#include "serve/request_threads.h"
#include "common/thread_priority.h"
#include "tests/testutil.h"

#include <sys/resource.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace agentenv;
using namespace std::chrono_literals;

TEST_CASE("request threads: every request runs at once, none queued behind a running one", "[serve]") {
  serve::RequestThreads threads;
  constexpr int kTasks = 8;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::atomic<int> met{0};
  // Each task waits for all the others: if one were queued behind a
  // running task, none would see all arrive.
  for (int i = 0; i < kTasks; ++i)
    threads.Run([&] {
      std::unique_lock lock(mu);
      ++arrived;
      cv.notify_all();
      if (cv.wait_for(lock, 10s, [&] { return arrived == kTasks; })) ++met;
    });
  REQUIRE(test::WaitFor([&] { return met.load() == kTasks; }, 10000));
  CHECK(threads.threads() == kTasks);
}

TEST_CASE("request threads: a thread that finished takes the next request", "[serve]") {
  serve::RequestThreads threads;
  std::atomic<bool> done{false};
  std::thread::id first, second;
  threads.Run([&] {
    first = std::this_thread::get_id();
    done = true;
  });
  REQUIRE(test::WaitFor([&] { return done.load(); }, 10000));
  done = false;
  REQUIRE(test::WaitFor([&] { return threads.idle() == 1; }, 10000));
  threads.Run([&] {
    second = std::this_thread::get_id();
    done = true;
  });
  REQUIRE(test::WaitFor([&] { return done.load(); }, 10000));
  CHECK(second == first);
  CHECK(threads.threads() == 1);
}

TEST_CASE("request threads: idle threads end after the linger, and the next request starts one", "[serve]") {
  serve::RequestThreads threads(20ms);
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) threads.Run([&] { ++ran; });
  REQUIRE(test::WaitFor([&] { return ran.load() == 3 && threads.threads() == 0; }, 10000));
  threads.Run([&] { ++ran; });
  REQUIRE(test::WaitFor([&] { return ran.load() == 4; }, 10000));
}

TEST_CASE("request threads: hand-offs racing the linger lose no request", "[serve]") {
  // A 1 ms linger makes idle threads time out while requests are handed
  // to them: every request must still run exactly once.
  std::atomic<int> ran{0};
  {
    serve::RequestThreads threads(1ms);
    std::vector<std::thread> senders;
    for (int s = 0; s < 4; ++s)
      senders.emplace_back([&] {
        for (int i = 0; i < 500; ++i) {
          threads.Run([&] { ++ran; });
          if (i % 50 == 0) std::this_thread::sleep_for(2ms);
        }
      });
    for (auto& t : senders) t.join();
  }  // the destructor waits for every request handed over
  CHECK(ran.load() == 2000);
}

TEST_CASE("request threads: the destructor waits for the running requests", "[serve]") {
  std::atomic<bool> finished{false};
  {
    serve::RequestThreads threads;
    threads.Run([&] {
      std::this_thread::sleep_for(50ms);
      finished = true;
    });
  }
  CHECK(finished.load());
}

TEST_CASE("request threads: a thread left below its priority by a writer ends instead of serving the next request", "[serve]") {
  // Unprivileged: a request that lowers its thread's priority cannot raise it back.
  CHECK(test::WithoutNicePrivilege([] {
    const int base = getpriority(PRIO_PROCESS, 0);
    serve::RequestThreads threads;
    std::atomic<int> ran{0};
    threads.Run([&] {
      LowerThreadPriority low(6);
      ++ran;
    });
    // It ends (no linger, which is 30 s here) ...
    if (!test::WaitFor([&] { return ran.load() == 1 && threads.threads() == 0; }, 10000)) return false;
    // ... and the next request runs on a new thread at the process's priority.
    std::atomic<int> seen{-100};
    threads.Run([&] { seen = getpriority(PRIO_PROCESS, 0); });
    if (!test::WaitFor([&] { return seen.load() != -100; }, 10000) || seen.load() != base) return false;
    // A request that changes no priority leaves its thread waiting for the next.
    return test::WaitFor([&] { return threads.idle() == 1; }, 10000);
  }));
}
