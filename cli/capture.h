// Automatic capture for the daemon and the supervisor: a watcher on the
// live tree whose debounced change sets become snapshots.
#pragma once

#include <atomic>
#include <memory>

#include "cli/cli.h"
#include "watch/debounce.h"

namespace agentenv::cli {

struct CaptureOptions {
  int quiet_ms = 300;
  int max_delay_ms = 3000;
};

// A running capture. While it runs, the repository's restores ask it first
// (Repo::set_settle), so a rollback saves uncommitted changes from the
// journal instead of walking the whole live tree.
class Capture {
 public:
  // Starts watching the live tree, then takes a baseline snapshot of what
  // changed while nothing watched. Progress goes to stderr. Errors: I/O,
  // bad ignore file.
  static Result<std::unique_ptr<Capture>> Start(snap::Repo& repo, const CaptureOptions& opt);
  // Unhooks from the repository and stops without delivering.
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Snapshots every change queued so far, now. True when history then holds
  // every change made to the live tree before the call (the journal missed
  // nothing and each snapshot worked); false when only a full scan can
  // tell. The caller must hold WriterMutex() (every writer of this process
  // does); not from a capture callback.
  bool Settle();
  // Stops watching; with deliver_pending the last changes become a node.
  void Stop(bool deliver_pending);

 private:
  explicit Capture(snap::Repo& repo) : repo_(repo) {}
  // Turns one debounced change set into a snapshot.
  void Snapshot(const watch::ChangeSet& cs);

  snap::Repo& repo_;
  std::unique_ptr<watch::Watcher> watcher_;
  std::atomic<bool> complete_{false};  // history holds every change delivered so far
  std::atomic<bool> stopped_{false};
  std::atomic<bool> lent_{false};  // a Settle caller holds WriterMutex() for us
  int since_retain_ = 0;  // capture thread only
};

// One line on stderr with a timestamp, for long-running commands.
void DaemonLog(const std::string& line);

}  // namespace agentenv::cli
