// trials/tournament: N candidates forked from one node, run in parallel,
// the first to pass its test wins (trials/tournament.h).
#include "trials/tournament.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include "history/node_view.h"
#include "run/jobs.h"
#include "snap/fsops.h"
#include "store/worker_pool.h"
#include "workspace/workspace.h"

namespace agentenv::trials {
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

Result<TournamentReply> Tournament(snap::Repo& repo, const TournamentRequest& r, const run::FrameSink& emit,
                                   const snap::Requester& who) {
  const auto start = Clock::now();
  if (r.candidates.empty()) return Fail(ErrorCode::kInvalid, "tournament needs the argument 'candidates': at least one command line to try (on the CLI, after --)");
  if (r.test.empty()) return Fail(ErrorCode::kInvalid, "tournament: no test (--test CMD; exit 0 passes)");
  if (r.keep != "winner" && r.keep != "all") return Fail(ErrorCode::kInvalid, "tournament: keep must be winner or all");
  if (r.jobs == 0) return Fail(ErrorCode::kInvalid, "tournament: jobs must be at least 1");
  AE_ASSIGN(auto timeout, run::RunTimeout(r.timeout_s, "tournament: timeout_s"));
  AE_ASSIGN(runner::Network network, run::ParseNetwork(r.network));
  // Workspaces a killed tournament left behind: nothing runs in them. Each
  // is locked, then read again: the tournament that made it may have kept
  // it (an ordinary workspace now) between the listing and the lock.
  AE_ASSIGN(auto existing, workspace::ListWorkspaces(repo.root()));
  for (const auto& ws : existing) {
    if (ws.tournament.empty() || workspace::WorkspaceBusy(ws)) continue;
    auto fresh = workspace::LoadWorkspace(repo.root(), ws.name);  // kept since the listing: skip without a lock
    if (!fresh || fresh->tournament.empty()) continue;
    auto lock = workspace::LockWorkspace(ws, "a tournament's sweep of workspaces killed tournaments left");
    if (!lock) continue;
    auto now = workspace::LoadWorkspace(repo.root(), ws.name);
    if (now && !now->tournament.empty()) (void)workspace::RemoveWorkspace(repo, *now, std::move(*lock));
  }

  TournamentReply rep;
  rep.id = TournamentId();
  const size_t n = r.candidates.size();
  std::vector<workspace::Workspace> spaces;
  // Each candidate's workspace is locked from its creation to the end of
  // the tournament (a candidate waiting for its turn is not "left by a
  // killed tournament" to the next one's sweep).
  std::vector<UniqueFd> locks;
  auto make = [&](size_t i, const store::ObjectId& base, const snap::LowerLease& lower) -> Result<void> {
    UniqueFd lock;
    AE_ASSIGN(workspace::Workspace ws, workspace::CreateWorkspace(repo, rep.id + "-" + std::to_string(i + 1), base, lower.dir(), rep.id,
                                            r.disk_bytes, &lock, "tournament " + rep.id));
    spaces.push_back(std::move(ws));
    locks.push_back(std::move(lock));
    rep.candidates.push_back({i, r.candidates[i], spaces.back().name});
    return {};
  };
  // The lower is leased for the whole tournament; the first candidate's
  // workspace leases the base node (LeaseResolved), and so do the others.
  std::optional<snap::LowerLease> lower;
  AE_ASSIGN(store::ObjectId base, workspace::LeaseResolved(repo, r.base, [&](const store::ObjectId& node) -> Result<store::ObjectId> {
    AE_ASSIGN(snap::LowerLease leased, repo.LeaseLower(node));
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
    workspace::Workspace& ws = spaces[i];
    const auto began = Clock::now();
    auto done = [&] {
      finished[i] = Clock::now();
      c.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(finished[i] - began).count();
    };
    run::TrialCommand cmd{c.candidate, network, timeout, 65536, r.disk_bytes};
    if (cancelled) return c.error = "cancelled", done();
    auto ran = run::RunInWorkspace(repo, ws, locks[i].get(), lower->fd(), cmd, keep_going);
    if (!ran) return c.error = ran.error().message, done();
    if (cancelled) return c.error = "cancelled", done();
    c.exit_code = CodeOf(*ran);
    c.timed_out = ran->timed_out;
    cmd.line = r.test;
    auto tested = run::RunInWorkspace(repo, ws, locks[i].get(), lower->fd(), cmd, keep_going);
    if (!tested) return c.error = "test: " + tested.error().message, done();
    if (cancelled) return c.error = "cancelled", done();
    c.test_exit_code = CodeOf(*tested);
    c.timed_out |= tested->timed_out;
    c.passed = c.test_exit_code == 0 && !c.timed_out;
    done();  // the finish line is the test's verdict, not the snapshot
    snap::SnapOptions opt;
    snap::CommandOutcome how;
    if (ran->signal) how.signal = uint32_t(ran->signal);
    else how.exit_code = ran->exit_code;
    how.timed_out = ran->timed_out;
    how.duration_ms = c.duration_ms;
    opt.provenance = run::CommandProvenance(snap::ProvenanceKind::kTournament, c.candidate, {}, "", how, who);
    opt.provenance->workspace = ws.name;
    opt.provenance->base = ws.base;
    opt.provenance->tournament = snap::TournamentRole{rep.id, uint32_t(i), uint32_t(n), c.test_exit_code, false};
    opt.allow_empty = true;  // every candidate is a branch, even one that changed nothing
    auto snapped = run::RecordWorkspace(repo, ws, opt);
    if (!snapped) {
      c.passed = false;
      c.error = "snapshot: " + snapped.error().message;
      return;
    }
    if (snapped->node) {
      auto rec = repo.Record(*snapped->node);
      if (rec) c.node = history::MakeNodeInfo(*rec);
    }
    c.changed = snapped->changes.total();
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
    CandidateResult& won = rep.candidates[*rep.winner];
    won.winner = true;
    // The winner says so in its record (and its title, rendered again).
    AE_ASSIGN(store::ObjectId node, store::ObjectId::FromHex(won.node->id));
    AE_ASSIGN(snap::NodeRecord rec, repo.EditProvenance(node, [](snap::Provenance& p) {
      if (p.tournament) p.tournament->won = true;
    }));
    won.node = history::MakeNodeInfo(rec);
  }
  // The kept workspaces become ordinary ones; the rest go (their nodes stay).
  for (size_t i = 0; i < n; ++i) {
    workspace::Workspace& ws = spaces[i];
    if (r.keep == "all" || (rep.winner && *rep.winner == i)) {
      ws.tournament.clear();
      (void)workspace::SaveWorkspace(ws);
    } else if (workspace::RemoveWorkspace(repo, ws, std::move(locks[i]))) {
      rep.candidates[i].workspace.clear();
    }
  }
  rep.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  return rep;
}

}  // namespace agentenv::trials
