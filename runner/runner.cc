// Run: the one-shot on top of Env — capture with a cap, and a deadline that
// kills the whole tree. PumpOutput: the output loop Run and the control
// plane's exec share.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "common/unique_fd.h"
#include "runner/runner.h"

namespace agentenv::runner {

Result<PumpResult> PumpOutput(int pidfd, std::vector<UniqueFd>& pipes, const PumpOptions& opt,
                              const std::function<bool(size_t, std::string_view)>& on_output) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = opt.start + opt.timeout;
  const bool has_deadline = opt.timeout.count() > 0;
  PumpResult res;
  bool exited = false;
  auto stop = [&] {
    if (res.stopped) return;
    res.stopped = true;
    opt.kill();  // returns when no process is left: the pipes' writers are gone
  };
  auto open_pipes = [&] { return std::any_of(pipes.begin(), pipes.end(), [](const UniqueFd& f) { return bool(f); }); };
  while (!exited || open_pipes()) {
    std::vector<pollfd> pfds;
    if (!exited) pfds.push_back({pidfd, POLLIN, 0});
    for (auto& p : pipes) if (p) pfds.push_back({p.get(), POLLIN, 0});
    // A silent command still notices a listener that went away.
    int timeout_ms = opt.probe && !res.stopped && !exited ? opt.probe_ms : -1;
    if (has_deadline && !exited) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      int until = left > 0 ? int(left) + 1 : 0;
      timeout_ms = timeout_ms < 0 ? until : std::min(timeout_ms, until);
    }
    int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) return FailErrno("poll", errno);
    if (n == 0 && opt.probe && !res.stopped && !exited && !opt.probe()) stop();
    if (has_deadline && !exited && Clock::now() >= deadline) {
      res.timed_out = true;
      stop();
      exited = true;
      continue;
    }
    if (n <= 0) continue;
    size_t k = 0;
    if (!exited && pfds[k++].revents) exited = true;  // init gone: every process of the env is gone
    for (size_t i = 0; i < pipes.size(); ++i) {
      if (!pipes[i] || !pfds[k++].revents) continue;
      char buf[65536];
      ssize_t r = ::read(pipes[i].get(), buf, sizeof buf);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        pipes[i].reset();
        if (!res.stopped && !on_output(i, {})) stop();
        continue;
      }
      if (!res.stopped && !on_output(i, std::string_view(buf, size_t(r)))) stop();
    }
  }
  return res;
}

Result<RunResult> Run(const EnvSpec& spec, const std::function<bool()>& keep_going) {
  PumpOptions opt;
  opt.timeout = spec.limits.timeout;
  if (keep_going) {
    opt.probe_ms = 250;
    opt.probe = keep_going;
  }
  const bool capture = spec.stdio == Stdio::kCapture;
  RunResult res;
  std::vector<UniqueFd> pipes;
  UniqueFd out_w, err_w;
  if (capture) {
    int p[2];
    for (UniqueFd* w : {&out_w, &err_w}) {
      if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
      pipes.emplace_back(p[0]);
      w->reset(p[1]);
    }
  }
  AE_ASSIGN(Env env, Env::Start(spec, StdioFds{-1, out_w.get(), err_w.get()}));
  out_w.reset();
  err_w.reset();
  opt.kill = [&env] { env.KillAll(); };
  const uint64_t cap = spec.limits.output_cap;
  AE_ASSIGN(PumpResult pumped, PumpOutput(env.pidfd(), pipes, opt, [&](size_t i, std::string_view data) {
    std::string& buf = i == 0 ? res.out : res.err;
    uint64_t room = cap ? cap - std::min<uint64_t>(cap, buf.size()) : data.size();
    if (data.size() > room) (i == 0 ? res.out_truncated : res.err_truncated) = true;
    buf.append(data.substr(0, std::min<uint64_t>(room, data.size())));
    return !keep_going || keep_going();
  }));
  res.timed_out = pumped.timed_out;
  res.stopped = pumped.stopped;
  AE_ASSIGN(ExitStatus st, env.Wait());
  static_cast<ExitStatus&>(res) = st;
  if (env.disk() >= 0) {
    res.disk = std::make_shared<UniqueFd>(fcntl(env.disk(), F_DUPFD_CLOEXEC, 0));
    if (!*res.disk) return FailErrno("disk quota: its tmpfs", errno);
  }
  res.duration = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - opt.start);
  return res;
}

}  // namespace agentenv::runner
