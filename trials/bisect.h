// trials/bisect: the first node on the path from a good node to a bad
// one where a test command fails, testing K nodes at a time, each in its
// own workspace forked from the node (nothing in the live tree changes).
//
// The path is bad's chain of parents back to good (good must be an
// ancestor); good is trusted to pass and bad to fail, as `git bisect run`
// trusts them. Without good, the path starts at the root of bad's history
// and the root is tested like any node. A round tests up to K untested
// nodes strictly between the last known good and the first known bad,
// spread evenly, so the interval shrinks (K+1)-fold: about
// log_{K+1}(N) rounds (1,000 nodes, K=4: 5). The test's exit codes are
// git bisect run's: 0 good, 125 skip (the node cannot be tested), 1-127
// bad (but 125), 128 and above, a signal or a timeout abort the bisect.
// Skipped nodes are not tested again; when only skipped nodes are left
// between the bounds the result names all of them (ambiguous). A retain
// running meanwhile may drop path nodes: those not yet tested are left out
// like skipped ones; the first bad found so far keeps its workspace (whose
// lease keeps it in history) until the bisect ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/fields.h"
#include "history/node_view.h"
#include "snap/repo.h"

namespace agentenv::trials {

using history::ChangeInfo;
using history::NodeInfo;

struct BisectRequest {
  std::string test;        // shell command run in each node's workspace
  std::string good;        // empty: the root of bad's history
  std::string bad = "HEAD";
  uint64_t jobs = 4;       // nodes tested at once (K)
  double timeout_s = 0;    // per test; 0: none
  std::string network = "deny";
  template <class V> void Fields(V& v) {
    v("test", test); v("good", good); v("bad", bad); v("jobs", jobs); v("timeout_s", timeout_s);
    v("network", network);
  }
};
struct BisectTry {
  std::string id, short_id;
  uint64_t index = 0;            // on the path, 0 = good (or the root)
  std::string verdict;           // "good", "bad", "skip"; "dropped": retention
                                 // removed it before its test (left out as skipped)
  std::optional<int> exit_code;  // null: killed by a signal
  uint64_t duration_ms = 0;
  template <class V> void Fields(V& v) {
    v("id", id); v("short", short_id); v("index", index); v("verdict", verdict); v("exit_code", exit_code);
    v("duration_ms", duration_ms);
  }
};
struct BisectRound {
  std::vector<BisectTry> tried;
  uint64_t left = 0;  // untested nodes still between the bounds
  template <class V> void Fields(V& v) { v("tried", tried); v("left", left); }
};
struct BisectReply {
  uint64_t path = 0;  // nodes from good to bad, both included
  std::vector<BisectRound> rounds;
  bool found = false;              // first_bad is certain
  std::optional<NodeInfo> first_bad;  // with its package deltas
  std::optional<std::string> last_good;
  std::vector<std::string> candidates;  // ambiguous: skipped nodes and the first bad, oldest first
  uint64_t added = 0, modified = 0, deleted = 0;  // first_bad's changes versus its parent
  std::vector<ChangeInfo> sample;
  uint64_t duration_ms = 0;
  template <class V> void Fields(V& v) {
    v("path", path); v("rounds", rounds); v("found", found); v("first_bad", first_bad); v("last_good", last_good);
    v("candidates", candidates, kOmitEmpty); v("added", added); v("modified", modified); v("deleted", deleted);
    v("sample", sample); v("duration_ms", duration_ms);
  }
};

// Runs the bisection; workspaces are removed as each test ends. Errors:
// kInvalid (no test, jobs 0, good not an ancestor of bad, a test that
// exited 128+ or was killed: the message names the node and the code),
// kNotFound refs, what forking reports.
Result<BisectReply> Bisect(snap::Repo& repo, const BisectRequest& r);


}  // namespace agentenv::trials
