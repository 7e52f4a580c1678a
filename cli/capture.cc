#include "cli/capture.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/ops.h"
#include "snap/fsops.h"

namespace agentenv::cli {

namespace {

// Wall and CPU time of this thread since construction.
class CpuWallTimer {
 public:
  CpuWallTimer() : wall_(std::chrono::steady_clock::now()), cpu_(ThreadCpuNs()) {}
  // "wall_ms=1.234 cpu_ms=0.987"
  std::string Describe() const {
    double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_).count();
    char buf[64];
    std::snprintf(buf, sizeof buf, "wall_ms=%.3f cpu_ms=%.3f", wall, double(ThreadCpuNs() - cpu_) / 1e6);
    return buf;
  }

 private:
  static int64_t ThreadCpuNs() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  std::chrono::steady_clock::time_point wall_;
  int64_t cpu_;
};

}  // namespace

// No node if nothing really changed: the stat cache and tree ids decide.
void Capture::Snapshot(const watch::ChangeSet& cs) {
  // A running exec's changes belong to its own node, so capture waits for
  // the writer mutex, unless a writer holding it waits in Settle for this
  // very snapshot: then the mutex is lent to us (a blocking lock here would
  // deadlock with that writer).
  std::unique_lock writer(WriterMutex(), std::defer_lock);
  while (!lent_ && !writer.try_lock()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  snap::SnapOptions opt;
  // After a failed snapshot some changes are in no node: scan everything
  // until a full scan succeeds, not only the paths of this change set.
  if (!cs.rescan_all && complete_) {
    std::vector<std::string> paths;
    for (const auto& [path, scope] : cs.paths)
      (scope == watch::Scope::kSubtree ? paths : opt.entry_paths).push_back(path);
    opt.paths = std::move(paths);
  }
  // The change set arrives when the debounce ends: from here to the
  // committed node is the capture latency the benchmark reports.
  CpuWallTimer timer;
  auto r = repo_.Snapshot(opt);
  if (!r && opt.paths) {
    // The change set would be lost with this snapshot: fall back to a full
    // (stat-cached) scan, which sees everything.
    DaemonLog("snapshot of changed paths failed (" + r.error().message + "); rescanning");
    opt.paths.reset();
    r = repo_.Snapshot(opt);
  }
  if (!r) {
    complete_ = false;  // until a full scan succeeds
    return DaemonLog("snapshot failed: " + r.error().message);
  }
  if (!opt.paths) complete_ = true;
  if (!r->node) return;
  DaemonLog("node " + Short(*r->node) + ": " + r->label + " (" +
            (!opt.paths ? std::string("full scan") : std::to_string(cs.paths.size()) + " paths") + ", " +
            timer.Describe() + ")");
  // Thin history now and then; nodes are cheap to keep for a while.
  if (++since_retain_ < 64) return;
  since_retain_ = 0;
  auto kept = repo_.Retain(snap::RetentionPolicy{}, false, snap::NowNs());
  if (!kept) return DaemonLog("retention failed: " + kept.error().message);
  if (!kept->dropped.empty()) DaemonLog("retention dropped " + std::to_string(kept->dropped.size()) + " old nodes");
}

bool Capture::Settle() {
  if (stopped_) return false;
  lent_ = true;
  watcher_->Flush();
  lent_ = false;
  return complete_ && !watcher_->degraded() && !stopped_;
}

void Capture::Stop(bool deliver_pending) {
  stopped_ = true;
  watcher_->Stop(deliver_pending);
}

Capture::~Capture() {
  repo_.set_settle({});
  Stop(false);
}

void DaemonLog(const std::string& line) {
  std::fprintf(stderr, "%s agentenv: %s\n", FormatTime(snap::NowNs()).c_str(), line.c_str());
}

Result<std::unique_ptr<Capture>> Capture::Start(snap::Repo& repo, const CaptureOptions& opt) {
  AE_ASSIGN(watch::IgnoreRules rules, RepoIgnoreRules(repo.root()));
  watch::WatcherOptions wo;
  wo.timing.quiet = std::chrono::milliseconds(opt.quiet_ms);
  wo.timing.max_delay = std::chrono::milliseconds(opt.max_delay_ms);
  wo.journal.ignore = std::move(rules);
  wo.journal.on_warning = [](const std::string& w) { DaemonLog("warning: " + w); };
  std::unique_ptr<Capture> c(new Capture(repo));
  Capture* self = c.get();
  // The watch starts before the baseline scan, so nothing falls between.
  AE_ASSIGN(c->watcher_, watch::Watcher::Start(repo.work_dir(), wo, [self](watch::ChangeSet cs) { self->Snapshot(cs); }));
  c->Snapshot(watch::ChangeSet{{}, true});
  repo.set_settle([self] { return self->Settle(); });
  return c;
}

}  // namespace agentenv::cli
