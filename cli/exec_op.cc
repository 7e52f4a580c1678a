// The exec op: one command in a fresh env, its output streamed as frames
// (or collected), then a snapshot labelled with the command.
//
// Frames (ahead of the response, see README "Control socket"):
//   {"frame":"started","job":N,"pid":P}
//   {"frame":"stdout"|"stderr","data":"<UTF-8 text>"}  or  ...,"data_b64":"<base64>"}
// Valid UTF-8 goes as "data"; a chunk with invalid bytes is sent as its
// valid prefix ("data") and the rest from the first invalid byte ("data_b64").
// A multi-byte character split across reads is held back until it is whole,
// so text output stays text.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "cli/cli.h"
#include "cli/exec_session.h"
#include "cli/frames.h"
#include "cli/job_table.h"
#include "cli/jobs.h"
#include "common/unique_fd.h"

namespace agentenv::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// How often a streamed exec with no output checks that its client is still there.
constexpr int kProbeMs = 250;

// One output stream of the command: counts everything, keeps or sends up
// to the cap.
struct Output {
  const char* name;
  UniqueFd fd;
  uint64_t cap = 0;
  uint64_t bytes = 0;
  bool truncated = false;
  std::string kept;     // collect mode
  std::string pending;  // stream mode: an incomplete UTF-8 character

  // Takes one read's bytes; false when the frame could not be delivered.
  bool Take(std::string_view data, const OpFrameSink& emit) {
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
  bool Flush(const OpFrameSink& emit) {
    if (!emit || pending.empty()) return true;
    std::string rest = std::exchange(pending, "");
    return emit({{"frame", name}, {"data_b64", Base64Encode(rest)}});
  }
};

}  // namespace

Result<json> ExecOp(snap::Repo& repo, const json& args, const OpFrameSink& emit) {
  AE_ASSIGN(RunRequest req, ParseRunRequest(repo, args, true, !emit));
  Output outs[2] = {{"stdout"}, {"stderr"}};
  UniqueFd w[2];
  for (int i = 0; i < 2; ++i) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
    outs[i].fd.reset(p[0]);
    outs[i].cap = req.spec.limits.output_cap;
    w[i].reset(p[1]);
  }
  UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!in) return FailErrno("/dev/null", errno);

  // From the command's start to its snapshot: no other writer (nor the
  // automatic capture) takes the command's changes into another node.
  std::unique_lock writer(WriterMutex());
  const auto start = Clock::now();
  const auto deadline = start + req.spec.limits.timeout;
  const bool has_deadline = req.spec.limits.timeout.count() > 0;
  AE_ASSIGN(runner::Env env, runner::Env::Start(req.spec, {in.get(), w[0].get(), w[1].get()}));
  w[0].reset();
  w[1].reset();
  // Our own pidfd: a concurrent `kill` reaps the env and closes its pidfd.
  UniqueFd pidfd(::fcntl(env.pidfd(), F_DUPFD_CLOEXEC, 0));
  if (!pidfd) return FailErrno("pidfd", errno);  // ~Env kills the command
  const pid_t pid = env.pid();
  const uint64_t id = Jobs().NextId();
  auto job = Jobs().Add(id, "exec", req.line, std::move(env), "");
  struct Unlist {
    uint64_t id;
    ~Unlist() { Jobs().Remove(id); }
  } unlist{id};
  bool listening = !emit || emit({{"frame", "started"}, {"job", id}, {"pid", pid}});
  bool timed_out = false, exited = false;

  auto kill_job = [&] {
    std::lock_guard lock(job->mu);
    job->KillLocked();
  };
  if (!listening) kill_job();
  while (!exited || outs[0].fd || outs[1].fd) {
    std::vector<pollfd> pfds;
    if (!exited) pfds.push_back({pidfd.get(), POLLIN, 0});
    for (auto& o : outs) if (o.fd) pfds.push_back({o.fd.get(), POLLIN, 0});
    // A silent command still notices a client that went away (e.g. ^C on ctl exec).
    int timeout_ms = emit && listening && !exited ? kProbeMs : -1;
    if (has_deadline && !exited) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      int until = left > 0 ? int(left) + 1 : 0;
      timeout_ms = timeout_ms < 0 ? until : std::min(timeout_ms, until);
    }
    int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) return FailErrno("poll", errno);  // ~Job kills the command
    if (n == 0 && emit && listening && !exited && !emit(nullptr)) {
      listening = false;
      kill_job();
    }
    if (has_deadline && !exited && Clock::now() >= deadline) {
      timed_out = true;
      kill_job();  // returns when no process is left: the pipes' writers are gone
      exited = true;
      continue;
    }
    if (n <= 0) continue;
    size_t k = 0;
    if (!exited && pfds[k++].revents) exited = true;  // init gone: every process of the env is gone
    for (auto& o : outs) {
      if (!o.fd || !pfds[k++].revents) continue;
      char buf[65536];
      ssize_t r = ::read(o.fd.get(), buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        o.fd.reset();
        if (listening && !o.Flush(emit)) listening = false;
        continue;
      }
      if (listening && !o.Take(std::string_view(buf, size_t(r)), emit)) {
        listening = false;  // the client is gone: stop the command (its changes are still snapshotted)
        kill_job();
      }
    }
  }
  runner::ExitStatus st;
  bool killed = false;
  {
    std::lock_guard lock(job->mu);
    job->PollLocked();
    if (!job->status) job->KillLocked();
    st = *job->status;
    killed = job->killed && !timed_out;
  }
  const auto duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  json res = {{"exit_code", st.signal ? json(nullptr) : json(st.exit_code)}, {"signal", st.signal},
              {"timed_out", timed_out}, {"oom_killed", st.oom_killed}, {"killed", killed},
              {"duration_ms", duration.count()}, {"job", id}, {"command", req.line}};
  for (auto& o : outs) {
    if (!emit) res[o.name] = o.kept;
    res[std::string(o.name) + "_truncated"] = o.truncated;
    res[std::string(o.name) + "_bytes"] = o.bytes;
  }
  res["session"] = nullptr;
  if (!req.session.empty()) {
    AE_ASSIGN(SessionState s, LoadSession(req.session_dir));
    res["session"] = SessionJson(req.session, s);
  }
  res["node"] = nullptr;
  if (req.snapshot) {
    snap::SnapOptions opt;
    opt.label = "exec: " + req.line.substr(0, 180);
    auto snap = repo.Snapshot(opt);
    if (!snap) {
      return Fail(snap.error().code, "the command ran (exit " + std::to_string(st.signal ? 128 + st.signal : st.exit_code) +
                                         ") but its snapshot failed: " + snap.error().message);
    }
    if (snap->node) {
      AE_ASSIGN(snap::NodeRecord r, repo.Record(*snap->node));
      res["node"] = NodeJson(r);
    }
  }
  return res;
}

}  // namespace agentenv::cli
