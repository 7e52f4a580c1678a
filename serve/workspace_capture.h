// Automatic capture of a workspace an agent runs in (supervise
// --workspace): the overlay's upper is watched (inotify, on the host: the
// overlay writes there), and each debounced change set (the live tree's
// timing: quiet period and maximum delay) records the workspace as a node,
// rebuilt from the upper alone (run::RecordWorkspace: O(changes), no walk
// of the tree). The caller holds the workspace's lock for the whole time.
#pragma once

#include <memory>

#include "capture/capture.h"
#include "common/mutex.h"
#include "common/result.h"
#include "snap/repo.h"
#include "watch/debounce.h"
#include "workspace/workspace.h"

namespace agentenv::serve {

class WorkspaceCapture {
 public:
  // Starts watching `ws`'s upper, then records what changed before (a
  // baseline, no node when nothing did). `ws` (its head moves with each
  // node) and `repo` outlive the capture. Errors: the journal's, the
  // baseline's.
  static Result<std::unique_ptr<WorkspaceCapture>> Start(snap::Repo& repo, workspace::Workspace& ws,
                                                         const capture::CaptureOptions& opt);
  ~WorkspaceCapture();
  // Stops watching; with deliver_pending the last changes become a node.
  // Idempotent.
  void Stop(bool deliver_pending);

 private:
  WorkspaceCapture(snap::Repo& repo, workspace::Workspace& ws, const capture::CaptureOptions& opt)
      : repo_(repo), ws_(ws), opt_(opt) {}
  // Records the workspace (the watcher's thread, or Start's baseline).
  void Record();

  snap::Repo& repo_;
  Mutex record_mu_;  // one Record at a time: the baseline may meet the watcher's first
  workspace::Workspace& ws_;  // its head moved by Record, under record_mu_
  capture::CaptureOptions opt_;
  std::unique_ptr<watch::Watcher> watcher_;
};

}  // namespace agentenv::serve
