// tournament: N candidates forked from one node, run in parallel, the
// first to pass its test wins (control/server.h).
#include <chrono>
#include <atomic>
#include <mutex>
#include <optional>

#include "control/jobs.h"
#include "control/render.h"
#include "control/server.h"
#include "control/disk_quota.h"
#include "control/workspace.h"
#include "snap/fsops.h"
#include "store/worker_pool.h"

namespace agentenv::control {
namespace {

using Clock = std::chrono::steady_clock;

// "t" and 6 hex digits of the clock: short enough to type, unique enough
// among the tournaments of one repository (a clash is refused by kExists).
std::string TournamentId() {
  char buf[16];
  std::snprintf(buf, sizeof buf, "t%06llx", (unsigned long long)((snap::NowNs() / 1000) & 0xffffff));
  return buf;
}

std::optional<int> CodeOf(const runner::RunResult& r) {
  if (r.signal) return std::nullopt;
  return r.exit_code;
}

}  // namespace

Result<TournamentReply> Server::Tournament(const TournamentRequest& r, const FrameSink& emit) {
  const auto start = Clock::now();
  if (r.candidates.empty()) return Fail(ErrorCode::kInvalid, "tournament needs the argument 'candidates': at least one command line to try (on the CLI, after --)");
  if (r.test.empty()) return Fail(ErrorCode::kInvalid, "tournament: no test (--test CMD; exit 0 passes)");
  if (r.keep != "winner" && r.keep != "all") return Fail(ErrorCode::kInvalid, "tournament: keep must be winner or all");
  if (r.jobs == 0) return Fail(ErrorCode::kInvalid, "tournament: jobs must be at least 1");
  AE_ASSIGN(auto timeout, RunTimeout(r.timeout_s, "tournament: timeout_s"));
  AE_ASSIGN(runner::Network network, ParseNetwork(r.network));
  // Workspaces a killed tournament left behind: nothing runs in them.
  AE_ASSIGN(auto existing, ListWorkspaces(repo_->root()));
  for (const auto& ws : existing)
    if (!ws.tournament.empty() && !WorkspaceBusy(ws)) (void)RemoveWorkspace(*repo_, ws);

  TournamentReply rep;
  rep.id = TournamentId();
  const size_t n = r.candidates.size();
  std::vector<Workspace> spaces;
  // Each candidate's workspace is locked from its creation to the end of
  // the tournament (a candidate waiting for its turn is not "left by a
  // killed tournament" to the next one's sweep).
  std::vector<UniqueFd> locks;
  auto make = [&](size_t i, const store::ObjectId& base, const snap::LowerLease& lower) -> Result<void> {
    UniqueFd lock;
    AE_ASSIGN(Workspace ws, CreateWorkspace(*repo_, rep.id + "-" + std::to_string(i + 1), base, lower.dir(), rep.id,
                                            r.disk_bytes, &lock, "tournament " + rep.id));
    spaces.push_back(std::move(ws));
    locks.push_back(std::move(lock));
    rep.candidates.push_back({i, r.candidates[i], spaces.back().name});
    return {};
  };
  // The lower is leased for the whole tournament; the first candidate's
  // workspace leases the base node (LeaseResolved), and so do the others.
  std::optional<snap::LowerLease> lower;
  AE_ASSIGN(store::ObjectId base, LeaseResolved(r.base, [&](const store::ObjectId& node) -> Result<store::ObjectId> {
    AE_ASSIGN(snap::LowerLease leased, repo_->LeaseLower(node));
    AE_TRY(make(0, node, leased));
    lower.emplace(std::move(leased));
    return node;
  }));
  rep.base = base.Hex();
  for (size_t i = 1; i < n; ++i) AE_TRY(make(i, base, *lower));

  // One pool thread per running candidate (--jobs): each waits on its
  // child processes; the CPU work is theirs, not ours.
  std::vector<Clock::time_point> finished(n);
  std::mutex mu;  // guards the calls of emit
  std::atomic<bool> cancelled{false};
  auto keep_going = [&] {
    if (cancelled) return false;
    std::lock_guard l(mu);
    if (emit && !emit(nullptr)) cancelled = true;
    return !cancelled;
  };
  auto run_one = [&](size_t i) {
    CandidateResult& c = rep.candidates[i];
    Workspace& ws = spaces[i];
    const auto began = Clock::now();
    auto done = [&] {
      finished[i] = Clock::now();
      c.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(finished[i] - began).count();
    };
    runner::EnvSpec spec;
    spec.root = ws.mount_point();
    spec.overlay = ws.overlay();
    spec.held_fds = {locks[i].get(), lower->fd()};  // a candidate outliving a killed tournament keeps both
    spec.tied_to_caller = true;
    spec.network = network;
    spec.stdio = runner::Stdio::kCapture;
    spec.limits.output_cap = 65536;
    spec.limits.timeout = timeout;
    auto bytes = DiskBytesFor(repo_->root(), r.disk_bytes, ws.disk_bytes);
    if (!bytes) return c.error = bytes.error().message, done();
    auto limit = DiskLimit::Plan(*repo_, &spec, *bytes);
    if (!limit) return c.error = limit.error().message, done();
    // With a disk limit each command's writes are carried onto the upper.
    auto keep = [&](const runner::RunResult& run) { return limit->Keep(run.disk ? run.disk->get() : -1); };
    spec.argv = {"/bin/sh", "-c", c.candidate};
    if (cancelled) return c.error = "cancelled", done();
    auto ran = runner::Run(spec, keep_going);
    if (!ran) return c.error = ran.error().message, done();
    if (cancelled) return c.error = "cancelled", done();
    if (auto k = keep(*ran); !k) return c.error = k.error().message, done();
    c.exit_code = CodeOf(*ran);
    c.timed_out = ran->timed_out;
    spec.argv = {"/bin/sh", "-c", r.test};
    auto tested = runner::Run(spec, keep_going);
    if (!tested) return c.error = "test: " + tested.error().message, done();
    if (cancelled) return c.error = "cancelled", done();
    if (auto k = keep(*tested); !k) return c.error = "test: " + k.error().message, done();
    c.test_exit_code = CodeOf(*tested);
    c.timed_out |= tested->timed_out;
    c.passed = c.test_exit_code == 0 && !c.timed_out;
    done();  // the finish line is the test's verdict, not the snapshot
    snap::SnapOptions opt;
    opt.label = ("tournament " + rep.id + ": " + c.candidate).substr(0, 200);
    opt.allow_empty = true;  // every candidate is a branch, even one that changed nothing
    auto snapped = SnapshotLocked(ws, opt);
    if (!snapped) {
      c.passed = false;
      c.error = "snapshot: " + snapped.error().message;
      return;
    }
    c.node = snapped->node;
    c.changed = snapped->added + snapped->modified + snapped->deleted;
  };
  {
    store::WorkerPool pool(unsigned(std::min<size_t>(r.jobs, n)));
    for (size_t i = 0; i < n; ++i) pool.Submit([&run_one, i] { run_one(i); });
  }  // joins: every candidate is done

  for (size_t i = 0; i < n; ++i) {
    if (!rep.candidates[i].passed || !rep.candidates[i].node) continue;
    if (!rep.winner || finished[i] < finished[*rep.winner]) rep.winner = i;
  }
  rep.cancelled = cancelled;
  if (rep.winner && !cancelled) {
    rep.candidates[*rep.winner].winner = true;
    if (r.apply) {
      AE_ASSIGN(RollbackReply rb, Rollback({rep.candidates[*rep.winner].node->id}));
      rep.applied = true;
      rep.saved = rb.saved;
    }
  }
  // The kept workspaces become ordinary ones; the rest go (their nodes stay).
  for (size_t i = 0; i < n; ++i) {
    Workspace& ws = spaces[i];
    if (r.keep == "all" || (rep.winner && *rep.winner == i)) {
      ws.tournament.clear();
      (void)SaveWorkspace(ws);
    } else if (RemoveWorkspace(*repo_, ws, std::move(locks[i]))) {
      rep.candidates[i].workspace.clear();
    }
  }
  rep.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  return rep;
}

}  // namespace agentenv::control
