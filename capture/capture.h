// Automatic capture for the daemon, the supervisor and the shell: a
// watcher on the live tree whose debounced change sets become snapshots.
//
// Threads: the watcher's thread only queues change sets (it never waits
// for a writer); the capture's own thread snapshots them, taking the
// server's writer mutex like every writer. A rollback drains the queue
// itself while it holds that mutex.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "snap/repo.h"
#include "watch/debounce.h"

namespace agentenv::capture {

struct CaptureOptions {
  int quiet_ms = 300;
  int max_delay_ms = 3000;
  // Where what the capture does goes, one line each ("node 1a2b3c4d5e6f:
  // ...", warnings, failures): the serving process's log. Called from the
  // capture's and the watcher's threads; empty: dropped.
  std::function<void(const std::string&)> log;
  // What the nodes it makes record as their provenance: the daemon's watcher
  // (kCapture), or supervise's (kSupervise, who: the agent).
  snap::ProvenanceKind kind = snap::ProvenanceKind::kCapture;
  snap::Requester who{snap::Origin::kCapture, "", ""};
};

// How automatic capture is doing (status, the socket's status reply).
struct CaptureHealth {
  bool failing = false;     // the last snapshot failed: changes wait in no node
  std::string last_error;   // its message
  int64_t failing_since_ns = 0;
  uint64_t retries = 0;     // full rescans tried since it began failing
};

class Capture {
 public:
  // Starts watching the live tree, then takes a baseline snapshot of what
  // changed while nothing watched. `writers` is the mutex every writer of
  // this process holds. What it does goes to opt.log. Errors: I/O, bad
  // ignore file.
  static Result<std::unique_ptr<Capture>> Start(snap::Repo& repo, std::mutex& writers, const CaptureOptions& opt);
  // Stops without delivering.
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // With the writer mutex held by the caller: reads every event queued so
  // far and snapshots what is pending, on this thread. True when history
  // then holds every change made to the live tree before the call (the
  // journal missed nothing and every snapshot worked); false when only a
  // full scan can tell.
  bool Drain();
  // Stops watching; with deliver_pending the last changes become a node
  // (after a failed snapshot: one last full rescan). Waits for the capture
  // thread. Call without the writer mutex.
  void Stop(bool deliver_pending);
  // Thread-safe.
  CaptureHealth Health() const;

 private:
  Capture(snap::Repo& repo, std::mutex& writers, std::function<void(const std::string&)> log,
          snap::Provenance made_by)
      : repo_(repo), writers_(writers), log_(std::move(log)), made_by_(std::move(made_by)) {}
  void Loop();
  // Queues a change set (the watcher's callback).
  void Queue(watch::ChangeSet cs);
  // With the writer mutex held: snapshots what is queued, if anything.
  void SnapshotPending();
  // With the writer mutex held: one change set becomes a node (or none if
  // nothing really changed).
  void Snapshot(const watch::ChangeSet& cs);

  snap::Repo& repo_;
  std::mutex& writers_;
  const std::function<void(const std::string&)> log_;  // never empty
  const snap::Provenance made_by_;  // each node's provenance
  std::unique_ptr<watch::Watcher> watcher_;
  std::thread thread_;
  mutable std::mutex mu_;  // guards pending_, stopping_, health_
  std::condition_variable wake_;
  watch::ChangeSet pending_;
  bool stopping_ = false;
  CaptureHealth health_;
  // Under the writer mutex:
  bool complete_ = false;  // history holds every change snapshotted so far
  int since_retain_ = 0;
};


}  // namespace agentenv::capture
