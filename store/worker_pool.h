// A fixed set of threads running submitted tasks in FIFO order.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace agentenv::store {

class WorkerPool {
 public:
  explicit WorkerPool(unsigned threads);
  ~WorkerPool();  // runs the queued tasks, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Thread-safe. Tasks must not wait for other tasks of this pool.
  void Submit(std::function<void()> task);
  unsigned size() const { return unsigned(threads_.size()); }

 private:
  void Run();

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace agentenv::store
