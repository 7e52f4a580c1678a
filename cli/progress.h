// A progress line on stderr while a long command runs: what it is doing,
// files and bytes so far, the rate, and an ETA when the total is known.
// Only on a terminal, never with --json or -q; a command that ends within
// the first half second shows nothing.
#pragma once

#include <chrono>
#include <thread>

#include "cli/cli.h"
#include "common/mutex.h"
#include "common/progress.h"
#include "control/client.h"

namespace agentenv::cli {

class ProgressLine {
 public:
  explicit ProgressLine(const Globals& g);
  // Stops drawing and clears the line.
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // The counters to hand to the operation; null when nothing is shown.
  Progress* get() { return on_ ? &p_ : nullptr; }

 private:
  void Draw(std::chrono::steady_clock::time_point phase_start);
  // Waits up to `d` for stop_; whether it is set.
  bool WaitForStop(MutexLock& lock, std::chrono::milliseconds d) REQUIRES(mu_);

  Progress p_;
  bool on_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool drawn_ = false;  // only the drawing thread touches it until join
  std::thread thread_;
};

}  // namespace agentenv::cli

namespace agentenv::cli {

// fn(Progress*) with a progress line shown while it runs; its result comes
// back after the line is cleared, ready to print.
template <class Fn>
auto WithProgress(const Globals& g, Fn fn) {
  ProgressLine line(g);
  return fn(line.get());
}
// The same for an operation run through `client` (here, or at a daemon,
// which shows no progress).
template <class Fn>
auto WithProgress(const Globals& g, control::Client& client, Fn fn) {
  ProgressLine line(g);
  client.set_progress(line.get());
  auto r = fn();
  client.set_progress(nullptr);
  return r;
}

}  // namespace agentenv::cli
