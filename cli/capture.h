// Automatic capture for the daemon and the supervisor: a watcher on the
// live tree whose debounced change sets become snapshots.
#pragma once

#include <memory>

#include "cli/cli.h"
#include "watch/debounce.h"

namespace agentenv::cli {

struct CaptureOptions {
  int quiet_ms = 300;
  int max_delay_ms = 3000;
};

// Starts watching the live tree, then takes a baseline snapshot of what
// changed while nothing watched. Progress goes to stderr. Errors: I/O,
// bad ignore file.
Result<std::unique_ptr<watch::Watcher>> StartCapture(snap::Repo& repo, const CaptureOptions& opt);

// One line on stderr with a timestamp, for long-running commands.
void DaemonLog(const std::string& line);

}  // namespace agentenv::cli
