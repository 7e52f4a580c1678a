// bisect: K-ary search for the first failing node, each test in a
// workspace of its own (see bisect.h).
#include "trials/bisect.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "run/jobs.h"
#include "history/node_view.h"
#include "run/pipeline.h"
#include "snap/fsops.h"
#include "store/worker_pool.h"
#include "workspace/workspace.h"

namespace agentenv::trials {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t MsSince(Clock::time_point t) {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

// One tested node: its workspace (forked from it) and what the test said.
struct Trial {
  BisectTry result;
  std::optional<snap::LowerLease> lower;
  std::optional<workspace::Workspace> ws;
  UniqueFd lock;  // the workspace's, from its creation to its removal
  std::string error;  // could not test (fork, run), or an aborting exit
};

bool Gone(const Error& e) { return e.code == ErrorCode::kNotFound; }

// A node that retention dropped while the bisect ran is not an error: it
// is left out like a skipped one (its verdict says why).
void Dropped(Trial* t) {
  t->result.verdict = "dropped";
  t->error.clear();
}

// Forks the workspace (on the caller's thread: workspaces are made and
// removed one at a time, only the tests run in parallel).
void Prepare(snap::Repo& repo, const store::ObjectId& node, uint64_t index, const std::string& tag, Trial* t) {
  t->result.id = node.Hex();
  t->result.short_id = history::Short(node);
  t->result.index = index;
  // A failure because the node left history (its objects may be gone
  // before its record is) is a drop; any other is an error.
  auto fail = [&](const Error& e) {
    auto rec = repo.Record(node);
    if (!rec && Gone(rec.error())) return Dropped(t);
    t->error = e.message;
  };
  auto lower = repo.LeaseLower(node);
  if (!lower) return fail(lower.error());
  auto ws = workspace::CreateWorkspace(repo, "bisect-" + tag + "-" + std::to_string(index), node, lower->dir(), "", 0, &t->lock, "bisect");
  if (!ws) return fail(ws.error());
  t->lower = std::move(*lower);
  t->ws = std::move(*ws);
}

// Runs the test in the prepared workspace (any thread).
void RunTest(snap::Repo& repo, const std::string& test, std::chrono::milliseconds timeout, runner::Network network,
             Trial* t) {
  if (!t->ws) return;
  const auto began = Clock::now();
  auto ran = run::RunInWorkspace(repo, *t->ws, t->lock.get(), t->lower->fd(), {test, network, timeout, 4096, 0});
  t->result.duration_ms = MsSince(began);
  if (!ran) return void(t->error = ran.error().message);
  if (ran->signal || ran->timed_out)
    return void(t->error = ran->timed_out ? "timed out" : "killed by signal " + std::to_string(ran->signal));
  const int c = ran->exit_code;
  t->result.exit_code = c;
  if (c >= 128 || c < 0) t->error = "exit code " + std::to_string(c) + " (128 and above abort, as in git bisect run)";
  t->result.verdict = c == 0 ? "good" : c == 125 ? "skip" : "bad";
}

// The path, oldest first: bad's parents back to good (or the root); bad's
// record in `bad_rec`. Errors: kNotFound when a node of it left history
// during the walk (the caller starts over), kInvalid, I/O.
Result<std::vector<store::ObjectId>> Path(snap::Repo& repo, const store::ObjectId& bad,
                                          const std::optional<store::ObjectId>& good, snap::NodeRecord* bad_rec) {
  std::vector<store::ObjectId> path = {bad};
  for (store::ObjectId at = bad; !(good && at == *good);) {
    AE_ASSIGN(snap::NodeRecord rec, repo.Record(at));
    if (at == bad) *bad_rec = rec;
    if (!rec.parent) {
      if (good) return Fail(ErrorCode::kInvalid, "bisect: good " + history::Short(*good) + " is not an ancestor of bad " + history::Short(bad));
      break;
    }
    at = *rec.parent;
    path.push_back(at);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace

Result<BisectReply> Bisect(snap::Repo& repo, const BisectRequest& r) {
  const auto start = Clock::now();
  if (r.test.empty()) return Fail(ErrorCode::kInvalid, "bisect: no test (--test CMD: exit 0 good, 125 skip, 1-127 bad)");
  if (r.jobs == 0 || r.jobs > 256) return Fail(ErrorCode::kInvalid, "bisect: jobs must be 1 to 256");
  AE_ASSIGN(auto timeout, run::RunTimeout(r.timeout_s, "bisect: timeout_s"));
  AE_ASSIGN(runner::Network network, run::ParseNetwork(r.network));
  // A retain running meanwhile can drop a node the walk is about to read
  // (bad too, when it named HEAD and HEAD moved on): start over.
  store::ObjectId bad;
  std::optional<store::ObjectId> good;
  std::vector<store::ObjectId> path;
  snap::NodeRecord bad_rec;
  for (int attempt = 0;; ++attempt) {
    AE_ASSIGN(bad, repo.Resolve(r.bad));
    if (!r.good.empty()) {
      AE_ASSIGN(good, repo.Resolve(r.good));
    }
    auto walked = Path(repo, bad, good, &bad_rec);
    if (walked) {
      path = std::move(*walked);
      break;
    }
    if (!Gone(walked.error()) || attempt == 8) return Unexpected<Error>(walked.error());
  }
  BisectReply rep;
  rep.path = path.size();
  // Bounds: lo is known good (-1: nothing yet, no good given), hi known bad.
  int64_t lo = good ? 0 : -1, hi = int64_t(path.size()) - 1;
  std::set<int64_t> skipped, dropped;  // dropped: no longer in history, no candidate
  std::optional<Trial> held;  // the workspace of the first bad so far
  const std::string tag = history::Short(bad).substr(0, 8) + "-" + std::to_string(snap::NowNs() / 1000 % 1000000);
  auto untested = [&] {
    std::vector<int64_t> v;
    for (int64_t i = lo + 1; i < hi; ++i)
      if (!skipped.count(i) && !dropped.count(i)) v.push_back(i);
    return v;
  };
  for (;;) {
    std::vector<int64_t> open = untested();
    if (open.empty()) break;
    // K points splitting the open nodes into K+1 even parts.
    std::vector<int64_t> picks;
    const size_t m = open.size(), k = std::min<size_t>(r.jobs, m);
    for (size_t j = 1; j <= k; ++j) {
      int64_t at = open[std::min(m - 1, j * m / (k + 1))];
      if (picks.empty() || picks.back() != at) picks.push_back(at);
    }
    std::vector<Trial> trials(picks.size());
    for (size_t j = 0; j < picks.size(); ++j) Prepare(repo, path[size_t(picks[j])], uint64_t(picks[j]), tag, &trials[j]);
    {
      // One pool thread per test: each only waits on its command.
      store::WorkerPool pool(unsigned(picks.size()));
      for (size_t j = 0; j < picks.size(); ++j) pool.Submit([&, j] { RunTest(repo, r.test, timeout, network, &trials[j]); });
    }  // joins
    BisectRound round;
    for (const Trial& t : trials) {
      if (!t.error.empty()) {
        for (Trial& u : trials)
          if (u.ws) (void)workspace::RemoveWorkspace(repo, *u.ws, std::move(u.lock));
        return Fail(ErrorCode::kInvalid, "bisect: node " + t.result.short_id + ": " + t.error);
      }
      round.tried.push_back(t.result);
    }
    // In path order: the goods before the first bad move lo, the first bad
    // moves hi (a good after a bad does not: the first bad is wanted).
    int64_t first_bad = hi;
    for (const BisectTry& t : round.tried)
      if (t.verdict == "bad") first_bad = std::min(first_bad, int64_t(t.index));
    for (const BisectTry& t : round.tried) {
      if (t.verdict == "skip") skipped.insert(int64_t(t.index));
      if (t.verdict == "dropped") dropped.insert(int64_t(t.index));
      if (t.verdict == "good" && int64_t(t.index) < first_bad) lo = std::max(lo, int64_t(t.index));
    }
    // The first bad node's workspace stays until a better one is found or
    // the bisect ends: its lease keeps the answer in history meanwhile.
    for (Trial& t : trials) {
      if (first_bad != hi && int64_t(t.result.index) == first_bad) {
        if (held && held->ws) (void)workspace::RemoveWorkspace(repo, *held->ws, std::move(held->lock));
        held = std::move(t);
      } else if (t.ws) {
        (void)workspace::RemoveWorkspace(repo, *t.ws, std::move(t.lock));
      }
    }
    hi = first_bad;
    round.left = untested().size();
    rep.rounds.push_back(std::move(round));
  }

  for (int64_t i = lo + 1; i < hi; ++i)
    if (skipped.count(i)) rep.candidates.push_back(path[size_t(i)].Hex());
  rep.found = rep.candidates.empty();
  if (!rep.found) rep.candidates.push_back(path[size_t(hi)].Hex());
  if (lo >= 0) rep.last_good = path[size_t(lo)].Hex();
  const store::ObjectId& first = path[size_t(hi)];
  // Held in history by its workspace's lease, or bad itself (trusted, never
  // tested), whose record was read at the start: retain may have dropped it.
  auto found = held ? repo.Record(first) : Result<snap::NodeRecord>(bad_rec);
  if (!found) {
    if (held && held->ws) (void)workspace::RemoveWorkspace(repo, *held->ws, std::move(held->lock));
    return Unexpected<Error>(found.error());
  }
  const snap::NodeRecord& rec = *found;
  rep.first_bad = history::MakeNodeInfo(rec);
  if (!rec.packages) {
    if (auto p = repo.Packages(first)) {
      rep.first_bad->packages = history::MakePackageInfos(*p);
      rep.first_bad->packages_omitted = history::OmittedPackages(*p);
    }
  }
  if (auto node = snap::LoadNode(repo.store(), first)) {
    rep.added = node->changes.added;
    rep.modified = node->changes.modified;
    rep.deleted = node->changes.deleted;
    for (const auto& c : node->changes.sample) rep.sample.push_back(history::MakeChangeInfo(c));
  }
  if (held && held->ws) (void)workspace::RemoveWorkspace(repo, *held->ws, std::move(held->lock));
  rep.duration_ms = MsSince(start);
  return rep;
}

}  // namespace agentenv::trials
