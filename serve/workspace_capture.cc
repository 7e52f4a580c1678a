// Automatic capture of a workspace (serve/workspace_capture.h).
#include "serve/workspace_capture.h"

#include "run/pipeline.h"

namespace agentenv::serve {

Result<std::unique_ptr<WorkspaceCapture>> WorkspaceCapture::Start(snap::Repo& repo, workspace::Workspace& ws,
                                                                  const capture::CaptureOptions& opt) {
  std::unique_ptr<WorkspaceCapture> c(new WorkspaceCapture(repo, ws, opt));
  watch::WatcherOptions wo;
  wo.timing = {std::chrono::milliseconds(opt.quiet_ms), std::chrono::milliseconds(opt.max_delay_ms)};
  // The upper's own paths are the tree's: the same ignore rules apply.
  wo.journal.on_warning = opt.log;
  WorkspaceCapture* self = c.get();
  AE_ASSIGN(c->watcher_, watch::Watcher::Start(ws.upper(), wo, [self](watch::ChangeSet) { self->Record(); }));
  c->Record();  // what changed while nothing watched
  return c;
}

WorkspaceCapture::~WorkspaceCapture() { Stop(false); }

void WorkspaceCapture::Stop(bool deliver_pending) {
  if (watcher_) watcher_->Stop(deliver_pending);
}

void WorkspaceCapture::Record() {
  MutexLock lock(record_mu_);
  snap::SnapOptions so;
  snap::Provenance p;
  p.kind = opt_.kind;
  p.who = opt_.who;
  p.workspace = ws_.name;
  p.base = ws_.base;
  so.provenance = std::move(p);
  auto made = run::RecordWorkspace(repo_, ws_, so);
  if (!opt_.log) return;
  if (!made) opt_.log("workspace " + ws_.name + ": capture failed: " + made.error().message);
  else if (made->node) opt_.log("node " + made->node->Hex().substr(0, 12) + ": workspace " + ws_.name + ": " + made->label);
}

}  // namespace agentenv::serve
