// trials/tournament: several candidate commands tried in parallel, each in
// its own workspace forked from one node, a test run after each; the first
// to pass (by finish time) wins. Applying the winner to the live tree is
// the caller's (a rollback, which takes the writer lock).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/fields.h"
#include "history/node_view.h"
#include "run/pipeline.h"
#include "snap/repo.h"

namespace agentenv::trials {

struct TournamentRequest {
  std::string base = "HEAD";
  std::string test;                     // shell line; exit 0 = pass
  std::vector<std::string> candidates;  // shell lines
  uint64_t jobs = 4;                    // candidates run at once
  double timeout_s = 0;                 // per command; 0: none
  std::string network = "allow";
  std::string keep = "winner";          // workspaces kept afterwards: "winner" or "all"
  bool apply = true;                    // restore the live tree to the winner
  uint64_t disk_bytes = 0;              // per command in a candidate's workspace; 0: the default
  template <class V> void Fields(V& v) {
    v("base", base); v("test", test); v("candidates", candidates); v("jobs", jobs); v("timeout_s", timeout_s);
    v("network", network); v("keep", keep); v("apply", apply); v("disk_bytes", disk_bytes);
  }
};
struct CandidateResult {
  uint64_t index = 0;
  std::string candidate, workspace;
  std::optional<int> exit_code, test_exit_code;  // null: killed by a signal, or (test) not run
  bool timed_out = false;
  uint64_t duration_ms = 0;
  uint64_t changed = 0;  // paths changed against the base
  std::optional<history::NodeInfo> node;
  bool passed = false, winner = false;
  std::string error;  // the candidate could not run
  template <class V> void Fields(V& v) {
    v("index", index); v("candidate", candidate); v("workspace", workspace); v("exit_code", exit_code);
    v("test_exit_code", test_exit_code); v("timed_out", timed_out); v("duration_ms", duration_ms); v("changed", changed);
    v("node", node); v("passed", passed); v("winner", winner); v("error", error, kOmitEmpty);
  }
};
struct TournamentReply {
  std::string id;
  std::string base;  // node id
  std::vector<CandidateResult> candidates;
  std::optional<uint64_t> winner;  // index of the winning candidate
  bool applied = false;            // the live tree now holds the winner's node
  std::optional<std::string> saved;  // uncommitted live changes saved before applying
  uint64_t duration_ms = 0;
  bool cancelled = false;  // the caller cancelled: candidates killed, nothing applied
  template <class V> void Fields(V& v) {
    v("id", id); v("base", base); v("candidates", candidates); v("winner", winner); v("applied", applied);
    v("saved", saved); v("duration_ms", duration_ms); v("cancelled", cancelled);
  }
};

// Forks one workspace per candidate from `r.base`, runs candidate then
// test in each (up to `r.jobs` at once, through run::RunInWorkspace),
// records each as a child of the base (a branch, even when it changed
// nothing), picks the first to pass (by finish time, ties by order), keeps
// the winner's workspace (all with keep=all) and removes the others. The
// reply's `applied` and `saved` are left for the caller. `emit` is only
// probed (null frames): once it answers false (the caller cancelled or
// left) every candidate is killed, none is tested or recorded, and the
// reply says `cancelled`. Workspaces a killed tournament left are removed
// first. Errors: kInvalid (arguments), kNotFound (base), I/O.
// `who` asked: recorded in each candidate's provenance.
Result<TournamentReply> Tournament(snap::Repo& repo, const TournamentRequest& r, const run::FrameSink& emit,
                                   const snap::Requester& who);

}  // namespace agentenv::trials
