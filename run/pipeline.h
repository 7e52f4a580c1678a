// run/pipeline: the one way a command runs in an environment and is
// recorded. exec (from the CLI, the socket and MCP), and the commands of
// tournaments and bisects, all go through here:
//
//   environment (the live tree, or a workspace: its overlay, its lock and
//   its lower's lease) -> disk limit planned (mounts/disk_limit.h) -> the
//   command run in a fresh env (runner/) -> its writes kept (the disk
//   limit's upper carried onto the tree) -> its node recorded.
//
// A live-tree command holds the host's writer mutex from its start to its
// node, so no other writer (the automatic capture above all) takes its
// changes into another node. A workspace's command holds the workspace's
// lock instead and never touches the live tree.
#pragma once

#include <array>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mutex.h"
#include "common/result.h"
#include "run/jobs.h"
#include "run/session.h"
#include "runner/runner.h"
#include "snap/repo.h"
#include "workspace/workspace.h"

namespace agentenv::run {

// Receives the frames a running command produces (its output, "started");
// returns false when nobody listens any more (the command is then
// stopped). A null frame is a probe: nothing is sent, the answer is
// whether anybody still listens.
using FrameSink = std::function<bool(nlohmann::json frame)>;

// What a command shares with the other commands of its process: the
// serving Server's repository, writer mutex and jobs.
// The live tree's queue of execs that snapshot: one is in at a time, the
// others wait (each for at most its timeout, while its caller listens).
// Thread-safe.
class ExecQueue {
 public:
  // Enters when nobody is in; false (at once) otherwise.
  bool TryEnter() {
    MutexLock lock(mu_);
    return !std::exchange(busy_, true);
  }
  void Leave() {
    MutexLock lock(mu_);
    busy_ = false;
  }

 private:
  Mutex mu_;
  bool busy_ GUARDED_BY(mu_) = false;
};

struct Host {
  snap::Repo& repo;
  Mutex& writers;
  JobTable& jobs;
  ExecQueue& live_execs;
  int command_nice = 0;  // runner::Limits::nice of every command it runs
};

// Where a command's standard streams go.
struct Streams {
  // The caller's own stdin, stdout and stderr (its terminal): the command
  // reads and writes them itself; nothing is framed or collected.
  std::optional<std::array<int, 3>> passed;
  // Otherwise: stdin is /dev/null and the output goes to `emit` as frames
  // ({"frame":"stdout","data":...}), or is collected into the outcome when
  // `emit` is empty.
  FrameSink emit;
};

// How a command ended, and the node that records it.
struct Outcome {
  std::optional<int> exit_code;  // null when a signal ended it
  int signal = 0;
  bool timed_out = false, oom_killed = false, killed = false;
  bool cancelled = false;  // the caller went away or cancelled: the command was stopped
  // duration_ms: from the command's start to its end; queued_ms: how long
  // it waited for its environment before (part of its timeout).
  uint64_t duration_ms = 0, queued_ms = 0, job = 0;
  std::string command;
  std::optional<std::string> stdout_text, stderr_text;  // collected output
  bool stdout_truncated = false, stderr_truncated = false;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;
  std::optional<SessionState> session;  // after the command, when one was named
  std::optional<store::ObjectId> node;  // recorded; none when nothing changed or !r.snapshot
};

// Runs `r` (the exec op) in its environment and records its node with its
// provenance: the command whole, its cwd, how it ended (a cancelled one
// too), the workspace and its base, and `who` asked. Concurrent execs of
// one environment queue: a live-tree exec that snapshots waits for its turn
// in host.live_execs (then for the writer mutex, which other writers hold
// briefly), a workspace's exec for the workspace's lock (its overlay
// is mounted by one command at a time); a live-tree exec with
// `snapshot: false` records nothing and waits for none. The wait counts
// against the timeout (the command gets what is left) and is reported
// (queued_ms); a caller that stops listening leaves the queue. Errors:
// kInvalid (arguments), kNotFound (workspace), kBusy (the environment
// stayed busy for the whole timeout, or the caller left while it waited:
// nothing ran), kNoProgram (nothing ran), the runner's start-up; an error with
// `partial` set: the command ran but its changes could not all be kept or
// recorded. Thread-safe.
// `owner`: the MCP session whose job it is (run/jobs.h), "" none.
Result<Outcome> Exec(Host& host, const RunRequest& r, const Streams& io, const snap::Requester& who,
                     const std::string& owner = {});

// The provenance of a command's node: `kind` (exec, tournament, ...), the
// command (a shell line, else the argv), its cwd and how it ended.
snap::Provenance CommandProvenance(snap::ProvenanceKind kind, const std::string& line,
                                   const std::vector<std::string>& argv, const std::string& cwd,
                                   const snap::CommandOutcome& outcome, const snap::Requester& who);

// What a command of a tournament or a bisect is: a shell line in a
// workspace whose lock and lower the caller holds.
struct TrialCommand {
  std::string line;  // run by /bin/sh -c
  runner::Network network = runner::Network::kDeny;
  std::chrono::milliseconds timeout{0};  // 0: none
  uint64_t output_cap = 65536;
  uint64_t disk_bytes = 0;  // 0: the workspace's, else the repository's default
};
// Runs `c` in workspace `ws` (the caller holds `lock` and `lower`, which
// the env holds too, so a command outliving a killed caller keeps both),
// keeping what it wrote on the workspace's upper. `keep_going` is asked
// every 250 ms: false kills the command. Errors: as runner::Run, the disk
// limit's.
Result<runner::RunResult> RunInWorkspace(snap::Repo& repo, const workspace::Workspace& ws, int lock, int lower,
                                         const TrialCommand& c, const std::function<bool()>& keep_going = {});

// Records workspace `ws` (its lock held by the caller) as a node, child of
// its last node, and moves its head there. Errors: the snapshot's, I/O.
Result<snap::SnapResult> RecordWorkspace(snap::Repo& repo, workspace::Workspace& ws, const snap::SnapOptions& opt);

}  // namespace agentenv::run
