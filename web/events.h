// Live updates of the web DVR: one poller thread folds new nodes, HEAD
// moves and tag changes into the HistoryIndex (web/history.h) while at
// least one page listens, and fans them out to each listener's queue.
// Each queue is bounded: a listener that falls kMaxQueued events behind
// loses them and gets one "resync" instead (its page reloads the view),
// so a slow or stalled page never grows the server's memory.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "web/history.h"

namespace agentenv::web {

inline constexpr size_t kMaxQueued = 64;       // events per listener
inline constexpr size_t kMaxListeners = 16;    // open event streams
inline constexpr int kPollMs = 200;            // a node shows within this after it is recorded

class Listener {
 public:
  // Waits up to `ms` for events; returns those queued (SSE text, one
  // event each), possibly none. Thread-safe.
  std::vector<std::string> Take(int ms);
  void Push(const std::string& event);
  size_t queued();

 private:
  Mutex mu_;
  CondVar cv_;
  std::deque<std::string> q_ GUARDED_BY(mu_);
};

class EventHub {
 public:
  explicit EventHub(HistoryIndex& index) : index_(index) {}
  // Stop() first.
  ~EventHub();
  // A new listener, or null when kMaxListeners listen already. Starts
  // the poller on first use. Thread-safe.
  std::shared_ptr<Listener> Subscribe();
  void Unsubscribe(const std::shared_ptr<Listener>& l);
  // Ends the poller; listeners get nothing more. Idempotent.
  void Stop();
  bool stopping() const { return stop_; }
  size_t listeners();
  // The SSE text of an event: "event: <type>\ndata: <json>\n\n".
  static std::string Sse(const std::string& type, const json& data);

 private:
  void Run();
  void Publish(const std::string& event);

  HistoryIndex& index_;
  std::atomic<bool> stop_{false};
  Mutex mu_;
  CondVar cv_;
  std::vector<std::shared_ptr<Listener>> listeners_ GUARDED_BY(mu_);
  bool started_ GUARDED_BY(mu_) = false;
  std::thread poller_;
};

}  // namespace agentenv::web
