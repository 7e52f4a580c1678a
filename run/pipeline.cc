// The command pipeline (run/pipeline.h): one command in a fresh env, its
// output streamed as frames (or collected, or on the caller's own
// streams), then a node labelled with the command.
//
// Frames (ahead of the response, see README "Control socket"):
//   {"frame":"started","job":N,"pid":P}
//   {"frame":"stdout"|"stderr","data":"<UTF-8 text>"}  or  ...,"data_b64":"<base64>"}
// Valid UTF-8 goes as "data"; a chunk with invalid bytes is sent as its
// valid prefix ("data") and the rest from the first invalid byte ("data_b64").
// A multi-byte character split across reads is held back until it is whole,
// so text output stays text.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "run/pipeline.h"

#include "common/text.h"
#include "common/unique_fd.h"
#include "mounts/disk_limit.h"

namespace agentenv::run {
namespace {

using Clock = std::chrono::steady_clock;

// How often a streamed exec with no output checks that its client is still there.
constexpr int kProbeMs = 250;
// How often an exec waiting for its environment tries it again.
constexpr auto kQueuePoll = std::chrono::milliseconds(20);

// One output stream of the command: counts everything, keeps or sends up
// to the cap.
struct Output {
  const char* name;
  uint64_t cap = 0;
  uint64_t bytes = 0;
  bool truncated = false;
  std::string kept;     // collect mode
  std::string pending;  // stream mode: an incomplete UTF-8 character

  // Takes one read's bytes; false when the frame could not be delivered.
  bool Take(std::string_view data, const FrameSink& emit) {
    bytes += data.size();
    uint64_t sent = bytes - data.size();
    uint64_t room = cap ? cap - std::min(cap, sent) : data.size();
    if (data.size() > room) truncated = true;
    data = data.substr(0, std::min<uint64_t>(room, data.size()));
    if (!emit) {
      kept.append(data);
      return true;
    }
    if (data.empty()) return true;
    std::string chunk = pending + std::string(data);
    pending.clear();
    bool tail_ok = false;
    size_t valid = Utf8Prefix(chunk, &tail_ok);
    if (valid + (tail_ok ? chunk.size() - valid : 0) == chunk.size()) {
      pending = chunk.substr(valid);
      chunk.resize(valid);
      return chunk.empty() || emit({{"frame", name}, {"data", chunk}});
    }
    // Text up to the first invalid byte stays text; the rest goes as base64.
    if (valid > 0 && !emit({{"frame", name}, {"data", chunk.substr(0, valid)}})) return false;
    return emit({{"frame", name}, {"data_b64", Base64Encode(std::string_view(chunk).substr(valid))}});
  }
  bool Flush(const FrameSink& emit) {
    if (!emit || pending.empty()) return true;
    std::string rest = std::exchange(pending, "");
    return emit({{"frame", name}, {"data_b64", Base64Encode(rest)}});
  }
};

// The disk limit that applies to a command of `spec` in workspace `ws`
// (none: the live tree), planned on the spec.
Result<mounts::DiskLimit> PlanDisk(snap::Repo& repo, runner::EnvSpec* spec, uint64_t requested,
                                   const workspace::Workspace* ws) {
  AE_ASSIGN(uint64_t bytes, mounts::DiskBytesFor(repo.root(), requested, ws ? ws->disk_bytes : 0));
  return mounts::DiskLimit::Plan(repo, spec, bytes);
}

}  // namespace

snap::Provenance CommandProvenance(snap::ProvenanceKind kind, const std::string& line,
                                   const std::vector<std::string>& argv, const std::string& cwd,
                                   const snap::CommandOutcome& outcome, const snap::Requester& who) {
  snap::Provenance p;
  p.kind = kind;
  if (argv.empty()) p.line = line;
  else p.argv = argv;
  p.cwd = cwd;
  p.outcome = outcome;
  p.who = who;
  return p;
}

Result<Outcome> Exec(Host& host, const RunRequest& r, const Streams& io, const snap::Requester& who,
                     const std::string& owner) {
  snap::Repo& repo = host.repo;
  const FrameSink& emit = io.emit;
  // The caller's own streams (its terminal): no pipes, no frames.
  const bool passed = io.passed.has_value();
  AE_ASSIGN(PlannedRun run, PlanRun(repo, r, true, !emit && !passed));
  run.spec.limits.nice = host.command_nice;
  Output outs[2] = {{"stdout"}, {"stderr"}};
  std::vector<UniqueFd> pipes;
  UniqueFd w[2];
  UniqueFd in;
  runner::StdioFds stdio;
  if (passed) {
    stdio = {(*io.passed)[0], (*io.passed)[1], (*io.passed)[2]};
  } else {
    for (int i = 0; i < 2; ++i) {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
      pipes.emplace_back(p[0]);
      outs[i].cap = run.spec.limits.output_cap;
      w[i].reset(p[1]);
    }
    in.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in) return FailErrno("/dev/null", errno);
    stdio = {in.get(), w[0].get(), w[1].get()};
  }

  // The queue of the environment: `take` is tried until it holds it, the
  // timeout passes (kBusy, nothing ran) or the caller leaves.
  const auto asked = Clock::now();
  const std::chrono::milliseconds timeout = run.spec.limits.timeout;
  auto wait = [&](const std::function<Result<bool>()>& take) -> Result<void> {
    for (;;) {
      AE_ASSIGN(bool taken, take());
      if (taken) return {};
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked);
      if (timeout.count() > 0 && waited >= timeout)
        return Fail(ErrorCode::kBusy, "exec did not run: its environment stayed busy with another exec for its whole "
                                      "timeout (" + std::to_string(timeout.count()) + " ms)");
      if (emit && !emit(nullptr))
        return Fail(ErrorCode::kBusy, "exec did not run: the caller left while it waited for its environment");
      std::this_thread::sleep_for(kQueuePoll);
    }
  };
  // In a workspace: its overlay as the root, its lock and its lower's
  // lease held to the end.
  std::optional<workspace::WorkspaceInUse> in_ws;
  if (!r.workspace.empty()) {
    AE_TRY(wait([&]() -> Result<bool> {
      auto used = workspace::UseWorkspace(repo, r.workspace, "exec: " + run.line.substr(0, 160));
      if (!used && used.error().code == ErrorCode::kBusy) return false;
      if (!used) return Unexpected<Error>(used.error());
      in_ws = std::move(*used);
      return true;
    }));
    in_ws->Apply(&run.spec);
  }
  workspace::Workspace* ws = in_ws ? &in_ws->ws : nullptr;
  // From the command's start to its snapshot: no other writer (nor the
  // automatic capture) takes the command's changes into another node. A
  // workspace's command does not touch the live tree, and one that
  // records no node has no node to keep others' changes out of.
  std::unique_lock writer(host.writers, std::defer_lock);
  bool in_queue = false;
  if (!ws && r.snapshot) {
    AE_TRY(wait([&]() -> Result<bool> { return in_queue = host.live_execs.TryEnter(); }));
    writer.lock();
  }
  struct LeaveQueue {
    ExecQueue& q;
    const bool& in;
    ~LeaveQueue() {
      if (in) q.Leave();
    }
  } leave{host.live_execs, in_queue};
  const auto queued = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked);
  if (timeout.count() > 0) run.spec.limits.timeout = std::max(std::chrono::milliseconds(1), timeout - queued);
  AE_ASSIGN(mounts::DiskLimit limit, PlanDisk(repo, &run.spec, r.disk_bytes, ws));
  run.spec.tied_to_caller = true;  // this thread waits for it to the end
  runner::PumpOptions opt;
  opt.timeout = run.spec.limits.timeout;
  AE_ASSIGN(runner::Env env, runner::Env::Start(run.spec, stdio));
  w[0].reset();
  w[1].reset();
  // The disk limit's tmpfs, kept open to carry the changes out of it.
  UniqueFd disk(env.disk() >= 0 ? ::fcntl(env.disk(), F_DUPFD_CLOEXEC, 0) : -1);
  // Our own pidfd: a concurrent `kill` reaps the env and closes its pidfd.
  UniqueFd pidfd(::fcntl(env.pidfd(), F_DUPFD_CLOEXEC, 0));
  if (!pidfd) return FailErrno("pidfd", errno);  // ~Env kills the command
  const pid_t pid = env.pid();
  const uint64_t id = host.jobs.NextId();
  auto job = host.jobs.Add(id, "exec", run.line, std::move(env), "", owner, r.workspace);
  struct Unlist {
    JobTable& jobs;
    uint64_t id;
    ~Unlist() { jobs.Remove(id); }
  } unlist{host.jobs, id};
  opt.kill = [&job] {
    MutexLock lock(job->mu);
    job->KillLocked();
  };
  // False once the client is gone or cancelled the request: the command
  // stops; its changes still become a node, labelled as cancelled.
  bool listening = !emit || emit({{"frame", "started"}, {"job", id}, {"pid", pid}});
  if (emit) {
    // A silent command still notices a client that went away (^C on ctl exec).
    opt.probe_ms = kProbeMs;
    opt.probe = [&] { return listening = listening && emit(nullptr); };
  }
  if (!listening) opt.kill();
  AE_ASSIGN(runner::PumpResult pumped, runner::PumpOutput(pidfd.get(), pipes, opt, [&](size_t i, std::string_view data) {
    return listening = listening && (data.empty() ? outs[i].Flush(emit) : outs[i].Take(data, emit));
  }));
  runner::ExitStatus st;
  bool killed = false;
  {
    MutexLock lock(job->mu);
    job->PollLocked();
    if (!job->status) job->KillLocked();
    st = *job->status;
    killed = job->killed && !pumped.timed_out;
  }
  Outcome rep;
  if (!st.signal) rep.exit_code = st.exit_code;
  rep.signal = st.signal;
  rep.timed_out = pumped.timed_out;
  rep.oom_killed = st.oom_killed;
  rep.killed = killed;
  rep.cancelled = !listening;
  rep.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - opt.start).count();
  rep.queued_ms = queued.count();
  rep.job = id;
  rep.command = run.line;
  if (!emit && !passed) {
    rep.stdout_text = outs[0].kept;
    rep.stderr_text = outs[1].kept;
  }
  rep.stdout_truncated = outs[0].truncated;
  rep.stderr_truncated = outs[1].truncated;
  rep.stdout_bytes = outs[0].bytes;
  rep.stderr_bytes = outs[1].bytes;
  if (!r.session.empty()) {
    AE_ASSIGN(rep.session, LoadSession(run.session_dir));
  }
  if (auto kept = limit.Keep(disk.get()); !kept) {
    Error e = kept.error();
    e.message = "the command ran but its changes could not all be kept: " + e.message;
    e.partial = true;
    return Unexpected<Error>(std::move(e));
  }
  if (!r.snapshot) return rep;
  snap::SnapOptions so;
  snap::CommandOutcome how;
  how.exit_code = rep.exit_code;
  how.signal = uint32_t(rep.signal);
  how.timed_out = rep.timed_out;
  how.cancelled = rep.cancelled;
  how.killed = rep.killed || rep.oom_killed;
  how.duration_ms = rep.duration_ms;
  so.provenance = CommandProvenance(snap::ProvenanceKind::kExec, r.command, r.argv, r.cwd.value_or(""), how, who);
  if (ws) {
    so.provenance->workspace = ws->name;
    so.provenance->base = ws->base;
  }
  Result<snap::SnapResult> made = ws ? RecordWorkspace(repo, *ws, so) : repo.Snapshot(so);
  if (!made) {
    Error e = made.error();
    e.message = "the command ran (exit " + std::to_string(st.signal ? 128 + st.signal : st.exit_code) +
                ") but its snapshot failed: " + e.message;
    e.partial = true;
    return Unexpected<Error>(std::move(e));
  }
  rep.node = made->node;
  return rep;
}

Result<snap::SnapResult> RecordWorkspace(snap::Repo& repo, workspace::Workspace& ws, const snap::SnapOptions& opt) {
  AE_ASSIGN(snap::SnapResult res, repo.SnapshotUpper(ws.upper(), ws.base, ws.head, opt));
  if (res.node) {
    ws.head = *res.node;
    AE_TRY(workspace::SaveWorkspace(ws));
  }
  return res;
}

Result<runner::RunResult> RunInWorkspace(snap::Repo& repo, const workspace::Workspace& ws, int lock, int lower,
                                         const TrialCommand& c, const std::function<bool()>& keep_going) {
  runner::EnvSpec spec;
  spec.root = ws.mount_point();
  spec.overlay = ws.overlay();
  spec.held_fds = {lock, lower};  // a command outliving its killed caller keeps both
  spec.tied_to_caller = true;
  spec.network = c.network;
  spec.stdio = runner::Stdio::kCapture;
  spec.limits.output_cap = c.output_cap;
  spec.limits.timeout = c.timeout;
  spec.argv = {"/bin/sh", "-c", c.line};
  AE_ASSIGN(mounts::DiskLimit limit, PlanDisk(repo, &spec, c.disk_bytes, &ws));
  AE_ASSIGN(runner::RunResult ran, runner::Run(spec, keep_going));
  // With a disk limit the command's writes are carried onto the upper.
  AE_TRY(limit.Keep(ran.disk ? ran.disk->get() : -1));
  return ran;
}

}  // namespace agentenv::run
