// The threads that serve requests (the control socket's, an MCP
// session's). Each request runs at once on a thread of its own, never
// queued behind another (a `log` must not wait for a running `exec`), but
// a thread that finished one request waits a while for the next instead
// of ending: starting and ending a thread costs page faults and a TLB
// shootdown on every core, more than a small request itself. One that ran
// a writer's work below its priority and could not raise it back
// (common/thread_priority.h) ends instead.
//
// Not the data-parallel store::WorkerPool: that one queues tasks on a
// fixed set of threads, which would make a request wait for others.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>

#include "common/mutex.h"

namespace agentenv::serve {

class RequestThreads {
 public:
  // A thread idle for `linger` ends; the next request starts a new one.
  explicit RequestThreads(std::chrono::milliseconds linger = std::chrono::seconds(30)) : linger_(linger) {}
  // Waits for the requests running (and handed over) to finish and for
  // every thread to end.
  ~RequestThreads();
  RequestThreads(const RequestThreads&) = delete;
  RequestThreads& operator=(const RequestThreads&) = delete;

  // Runs `task` now: on an idle thread, else on a new one. Thread-safe.
  // Throws std::system_error when no thread can be started (as
  // std::thread does); the caller bounds how many run at once.
  void Run(std::function<void()> task);

  // Threads alive, running or idle; idle ones not yet handed a request
  // (for tests). Thread-safe.
  size_t threads() const;
  size_t idle() const;

 private:
  void Serve(std::function<void()> task);

  const std::chrono::milliseconds linger_;
  mutable Mutex mu_;
  CondVar handed_;  // a task was queued for an idle thread, or stopping_
  CondVar ended_;   // a thread ended
  // Tasks handed to idle threads that have not taken them yet.
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  size_t idle_ GUARDED_BY(mu_) = 0;  // idle threads not yet handed a task: waiting ones minus queue_.size()
  size_t threads_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace agentenv::serve
