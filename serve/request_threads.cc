#include "serve/request_threads.h"

#include <thread>

#include "common/thread_priority.h"

namespace agentenv::serve {

RequestThreads::~RequestThreads() {
  MutexLock lock(mu_);
  stopping_ = true;
  handed_.notify_all();
  while (threads_ > 0) ended_.wait(lock);
}

void RequestThreads::Run(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (idle_ > 0) {
      --idle_;
      queue_.push_back(std::move(task));
      handed_.notify_one();
      return;
    }
    ++threads_;
  }
  try {
    // Detached: the destructor waits on threads_, which a thread lowers
    // as the last thing it does with this object.
    std::thread([this, task = std::move(task)]() mutable { Serve(std::move(task)); }).detach();
  } catch (...) {
    MutexLock lock(mu_);
    --threads_;
    ended_.notify_all();
    throw;
  }
}

void RequestThreads::Serve(std::function<void()> task) {
  for (;;) {
    task();
    task = nullptr;  // what it holds is released before the thread waits
    MutexLock lock(mu_);
    // A thread left below its priority (a writer's, unprivileged) must not
    // serve a read: it ends, and the next request gets a new thread.
    if (ThreadPriorityLowered()) {
      --threads_;
      ended_.notify_all();
      return;
    }
    ++idle_;
    // Whatever wakes it, a queued task is taken: Run counted this thread
    // out of idle_ when it queued one, so leaving it would strand it.
    auto until = std::chrono::steady_clock::now() + linger_;
    while (queue_.empty() && !stopping_ && handed_.wait_until(lock, until) != std::cv_status::timeout) {
    }
    if (!queue_.empty()) {
      task = std::move(queue_.front());
      queue_.pop_front();
      continue;
    }
    --idle_;
    --threads_;
    ended_.notify_all();
    return;
  }
}

size_t RequestThreads::threads() const {
  MutexLock lock(mu_);
  return threads_;
}

size_t RequestThreads::idle() const {
  MutexLock lock(mu_);
  return idle_;
}

}  // namespace agentenv::serve
