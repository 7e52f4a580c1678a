#include "capture/capture.h"

#include <time.h>

#include <chrono>
#include <cstdio>

#include "history/node_view.h"
#include "snap/fsops.h"
#include "snap/layout.h"
#include "watch/ignore.h"

namespace agentenv::capture {
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

Result<std::unique_ptr<Capture>> Capture::Start(snap::Repo& repo, std::mutex& writers, const CaptureOptions& opt) {
  AE_ASSIGN(watch::IgnoreRules rules, watch::IgnoreRules::WithFile(snap::layout::Ignore(repo.root())));
  watch::WatcherOptions wo;
  wo.timing.quiet = std::chrono::milliseconds(opt.quiet_ms);
  wo.timing.max_delay = std::chrono::milliseconds(opt.max_delay_ms);
  wo.journal.ignore = std::move(rules);
  auto log = opt.log ? opt.log : [](const std::string&) {};
  wo.journal.on_warning = [log](const std::string& w) { log("warning: " + w); };
  snap::Provenance made_by;
  made_by.kind = opt.kind;
  made_by.who = opt.who;
  std::unique_ptr<Capture> c(new Capture(repo, writers, log, std::move(made_by)));
  Capture* self = c.get();
  // The watch starts before the baseline scan, so nothing falls between.
  AE_ASSIGN(c->watcher_, watch::Watcher::Start(repo.work_dir(), wo, [self](watch::ChangeSet cs) { self->Queue(std::move(cs)); }));
  {
    std::lock_guard writer(writers);
    c->Snapshot(watch::ChangeSet{{}, true});
  }
  c->thread_ = std::thread([self] { self->Loop(); });
  return c;
}

Capture::~Capture() { Stop(false); }

void Capture::Queue(watch::ChangeSet cs) {
  std::lock_guard lock(mu_);
  pending_.Merge(std::move(cs));
  wake_.notify_one();
}

// After a failed snapshot (ENOSPC, EIO) the changes it held are in no
// node and no new event may come: retry a full rescan on a timer, from
// 100 ms doubling to 1 s, so capture recovers within about a second of
// the cause going away.
constexpr auto kFirstRetry = std::chrono::milliseconds(100);
constexpr auto kMaxRetry = std::chrono::milliseconds(1000);

void Capture::Loop() {
  auto backoff = kFirstRetry;
  for (;;) {
    bool retry = false;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] { return stopping_ || !pending_.empty(); };
      if (health_.failing) {
        wake_.wait_for(lock, backoff, ready);
      } else {
        wake_.wait(lock, ready);
      }
      if (stopping_ && pending_.empty()) return;
      retry = pending_.empty();  // the timer: nothing new, retry the failed one
      if (retry) ++health_.retries;
    }
    // A running exec's changes belong to its own node: wait for it.
    std::lock_guard writer(writers_);
    if (retry) {
      Snapshot(watch::ChangeSet{{}, true});
    } else {
      SnapshotPending();
    }
    backoff = complete_ ? kFirstRetry : std::min(backoff * 2, kMaxRetry);
  }
}

CaptureHealth Capture::Health() const {
  std::lock_guard lock(mu_);
  return health_;
}

void Capture::SnapshotPending() {
  watch::ChangeSet cs;
  {
    std::lock_guard lock(mu_);
    cs = std::exchange(pending_, {});
  }
  if (cs.empty()) return;
  cs.Compact();
  Snapshot(cs);
}

bool Capture::Drain() {
  watcher_->Flush();  // the callback only queues: it never waits for our writer mutex
  SnapshotPending();
  return complete_ && !watcher_->degraded();
}

void Capture::Stop(bool deliver_pending) {
  if (!watcher_) return;
  watcher_->Stop(deliver_pending);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (!deliver_pending) pending_ = {};
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  if (deliver_pending && Health().failing) {  // what the failed snapshot held is in no node yet
    std::lock_guard writer(writers_);
    Snapshot(watch::ChangeSet{{}, true});
  }
}

// No node if nothing really changed: the stat cache and tree ids decide.
void Capture::Snapshot(const watch::ChangeSet& cs) {
  snap::SnapOptions opt;
  opt.provenance = made_by_;
  // After a failed snapshot some changes are in no node: scan everything
  // until a full scan succeeds, not only the paths of this change set.
  if (!cs.rescan_all && complete_) {
    std::vector<std::string> paths;
    for (const auto& [path, scope] : cs.paths)
      (scope == watch::Scope::kSubtree ? paths : opt.entry_paths).push_back(path);
    opt.paths = std::move(paths);
  }
  // From the change set's delivery to the committed node is the capture
  // latency the benchmark reports.
  CpuWallTimer timer;
  auto r = repo_.Snapshot(opt);
  if (!r && opt.paths) {
    // The change set would be lost with this snapshot: fall back to a full
    // (stat-cached) scan, which sees everything.
    log_("snapshot of changed paths failed (" + r.error().message + "); rescanning");
    opt.paths.reset();
    r = repo_.Snapshot(opt);
  }
  if (!r) {
    complete_ = false;  // until a full scan succeeds
    {
      std::lock_guard lock(mu_);
      if (!health_.failing) health_ = CaptureHealth{true, "", snap::NowNs(), 0};
      health_.last_error = r.error().message;
    }
    return log_("snapshot failed: " + r.error().message + " (retrying)");
  }
  if (!opt.paths) {
    complete_ = true;
    std::lock_guard lock(mu_);
    if (health_.failing) log_("capture recovered after " + std::to_string(health_.retries) + " retries");
    health_ = {};
  }
  if (!r->node) return;
  log_("node " + history::Short(*r->node) + ": " + r->label + " (" +
      (!opt.paths ? std::string("full scan") : std::to_string(cs.paths.size()) + " paths") + ", " +
      timer.Describe() + ")");
  // Thin history now and then; nodes are cheap to keep for a while.
  if (++since_retain_ < 64) return;
  since_retain_ = 0;
  auto kept = repo_.Retain(snap::RetentionPolicy{}, false, snap::NowNs());
  if (!kept) return log_("retention failed: " + kept.error().message);
  if (!kept->dropped.empty()) log_("retention dropped " + std::to_string(kept->dropped.size()) + " old nodes");
}

}  // namespace agentenv::capture
