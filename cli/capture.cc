#include "cli/capture.h"

#include <time.h>

#include <chrono>
#include <cstdio>

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

// Turns one debounced change set into a snapshot (no node if nothing
// really changed: the stat cache and tree ids decide).
void Capture(snap::Repo& repo, const watch::ChangeSet& cs) {
  snap::SnapOptions opt;
  if (!cs.rescan_all) {
    std::vector<std::string> paths;
    for (const auto& [path, scope] : cs.paths) paths.push_back(path);
    opt.paths = std::move(paths);
  }
  // The change set arrives when the debounce ends: from here to the
  // committed node is the capture latency the benchmark reports.
  CpuWallTimer timer;
  auto r = repo.Snapshot(opt);
  if (!r && opt.paths) {
    // The change set would be lost with this snapshot: fall back to a full
    // (stat-cached) scan, which sees everything.
    DaemonLog("snapshot of changed paths failed (" + r.error().message + "); rescanning");
    opt.paths.reset();
    r = repo.Snapshot(opt);
  }
  if (!r) return DaemonLog("snapshot failed: " + r.error().message);
  if (!r->node) return;
  DaemonLog("node " + Short(*r->node) + ": " + r->label + " (" +
            (cs.rescan_all ? std::string("full scan") : std::to_string(cs.paths.size()) + " paths") + ", " +
            timer.Describe() + ")");
  // Thin history now and then; nodes are cheap to keep for a while.
  static int since_retain = 0;
  if (++since_retain < 64) return;
  since_retain = 0;
  auto kept = repo.Retain(snap::RetentionPolicy{}, false, snap::NowNs());
  if (!kept) return DaemonLog("retention failed: " + kept.error().message);
  if (!kept->dropped.empty()) DaemonLog("retention dropped " + std::to_string(kept->dropped.size()) + " old nodes");
}

}  // namespace

void DaemonLog(const std::string& line) {
  std::fprintf(stderr, "%s agentenv: %s\n", FormatTime(snap::NowNs()).c_str(), line.c_str());
}

Result<std::unique_ptr<watch::Watcher>> StartCapture(snap::Repo& repo, const CaptureOptions& opt) {
  AE_ASSIGN(watch::IgnoreRules rules, RepoIgnoreRules(repo.root()));
  watch::WatcherOptions wo;
  wo.timing.quiet = std::chrono::milliseconds(opt.quiet_ms);
  wo.timing.max_delay = std::chrono::milliseconds(opt.max_delay_ms);
  wo.journal.ignore = std::move(rules);
  wo.journal.on_warning = [](const std::string& w) { DaemonLog("warning: " + w); };
  // The watch starts before the baseline scan, so nothing falls between.
  AE_ASSIGN(auto w, watch::Watcher::Start(repo.work_dir(), wo, [&repo](watch::ChangeSet cs) { Capture(repo, cs); }));
  Capture(repo, watch::ChangeSet{{}, true});
  return w;
}

}  // namespace agentenv::cli
