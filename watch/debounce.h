// Debouncing the journal: a burst of file events (a build, an install, an
// editor save) becomes one ChangeSet, delivered when the tree has been quiet
// for `quiet`, or at the latest `max_delay` after the first undelivered
// change, so that a process writing without pause still gets snapshots.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "watch/change_set.h"
#include "watch/journal.h"

namespace agentenv::watch {

using Clock = std::chrono::steady_clock;

struct DebounceTiming {
  std::chrono::milliseconds quiet{300};       // see docs/watch.md for both defaults
  std::chrono::milliseconds max_delay{3000};  // from the first undelivered change
};

// The timing rule alone, on caller-supplied times: no threads, no syscalls.
// Not thread-safe.
class Debouncer {
 public:
  explicit Debouncer(DebounceTiming timing) : timing_(timing) {}

  // Adds changes seen at `now`. An empty set is no activity: it neither
  // starts nor extends the quiet period.
  void Add(ChangeSet&& changes, Clock::time_point now);
  // When the pending changes become due; nullopt when nothing is pending.
  std::optional<Clock::time_point> Deadline() const;
  bool Due(Clock::time_point now) const;
  bool pending() const { return first_.has_value(); }
  // Hands out the pending changes (compacted) and restarts the timing.
  ChangeSet Take();

 private:
  DebounceTiming timing_;
  ChangeSet pending_;
  std::optional<Clock::time_point> first_;  // first undelivered change
  Clock::time_point last_{};                // latest change
};

struct WatcherOptions {
  DebounceTiming timing;
  // In degraded mode (watch limit hit) a rescan_all set is added this often,
  // since changes in unwatched directories are otherwise never seen.
  std::chrono::milliseconds degraded_rescan{std::chrono::seconds(30)};
  JournalOptions journal;  // ignore rules, warning callback
};

// Runs a Journal and a Debouncer on its own thread and calls on_changes with
// each due ChangeSet (never an empty one). Callbacks (changes and warnings)
// run on that thread, one at a time; they must not throw and must not call
// Stop, Flush or the destructor (Stop from a callback only requests the
// stop). The public functions are thread-safe.
class Watcher {
 public:
  using Callback = std::function<void(ChangeSet)>;

  // Opens the journal on the calling thread (errors as Journal::Open; the
  // initial walk takes ~2.5 s per 100k directories), then starts the thread.
  // Errors also: eventfd or thread creation failed.
  static Result<std::unique_ptr<Watcher>> Start(std::string root, WatcherOptions options,
                                                Callback on_changes);

  // Stops without delivering what is pending; joins the thread.
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Stops the thread and joins it. With deliver_pending, events queued so
  // far are read and the undelivered changes are passed to the callback
  // before this returns. Idempotent.
  void Stop(bool deliver_pending = true);

  // Reads every event queued so far and delivers the pending changes now,
  // ignoring the timing; returns after the callback returned (or at once
  // when nothing is pending or the watcher is stopped). For an explicit
  // "snapshot now".
  void Flush();

  bool degraded() const { return degraded_.load(); }
  size_t watch_count() const { return watch_count_.load(); }

 private:
  Watcher(Journal journal, WatcherOptions options, Callback on_changes, UniqueFd wake);
  void Loop();
  void Wake();
  void ReadJournal(Clock::time_point now);
  void Deliver();

  Journal journal_;
  WatcherOptions options_;
  Callback on_changes_;
  Debouncer debouncer_;
  UniqueFd wake_;  // eventfd: Stop and Flush requests
  std::atomic<bool> stop_{false};
  std::atomic<bool> deliver_on_stop_{false};
  std::atomic<bool> degraded_{false};
  std::atomic<size_t> watch_count_{0};
  Mutex join_mu_;  // two threads stopping must not both join
  Mutex mu_;
  CondVar flushed_;
  uint64_t flush_requested_ GUARDED_BY(mu_) = 0;
  uint64_t flush_done_ GUARDED_BY(mu_) = 0;
  bool finished_ GUARDED_BY(mu_) = false;  // the loop has exited
  std::thread thread_;
};

}  // namespace agentenv::watch
