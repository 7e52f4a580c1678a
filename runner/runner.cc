// Run: the one-shot on top of Env — capture with a cap, and a deadline that
// kills the whole tree.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "common/unique_fd.h"
#include "runner/runner.h"

namespace agentenv::runner {
namespace {

struct Capture {
  UniqueFd fd;
  std::string* buf;
  bool* truncated;
};

// Reads what is there; false at EOF (or error).
bool Drain(Capture& c, uint64_t cap) {
  char buf[65536];
  ssize_t r = read(c.fd.get(), buf, sizeof buf);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (r <= 0) return false;
  uint64_t room = cap ? cap - std::min<uint64_t>(cap, c.buf->size()) : uint64_t(r);
  if (uint64_t(r) > room) *c.truncated = true;
  c.buf->append(buf, std::min<uint64_t>(room, uint64_t(r)));
  return true;
}

}  // namespace

Result<RunResult> Run(const EnvSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + spec.limits.timeout;
  const bool capture = spec.stdio == Stdio::kCapture;
  RunResult res;
  std::vector<Capture> caps;
  UniqueFd out_w, err_w;
  if (capture) {
    int p[2];
    for (auto [w, buf, trunc] : {std::tuple{&out_w, &res.out, &res.out_truncated},
                                 std::tuple{&err_w, &res.err, &res.err_truncated}}) {
      if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
      caps.push_back({UniqueFd(p[0]), buf, trunc});
      w->reset(p[1]);
    }
  }
  AE_ASSIGN(Env env, Env::Start(spec, StdioFds{-1, out_w.get(), err_w.get()}));
  out_w.reset();
  err_w.reset();

  bool exited = false;
  while (!exited || std::any_of(caps.begin(), caps.end(), [](const Capture& c) { return bool(c.fd); })) {
    std::vector<pollfd> pfds;
    if (!exited) pfds.push_back({env.pidfd(), POLLIN, 0});
    for (auto& c : caps) if (c.fd) pfds.push_back({c.fd.get(), POLLIN, 0});
    int timeout_ms = -1;
    if (spec.limits.timeout.count() > 0 && !exited) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
      timeout_ms = left.count() > 0 ? int((left.count() + 999) / 1000) : 0;
    }
    int n = poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) return FailErrno("poll", errno);  // ~Env kills the tree
    if (!exited && spec.limits.timeout.count() > 0 && std::chrono::steady_clock::now() >= deadline) {
      res.timed_out = true;
      env.KillAll();  // returns when no process is left: the pipes' writers are gone
      exited = true;
      continue;
    }
    if (n <= 0) continue;
    size_t k = 0;
    if (!exited && pfds[k++].revents) exited = true;  // init gone: every process in the env is gone
    for (auto& c : caps) {
      if (c.fd && pfds[k++].revents && !Drain(c, spec.limits.output_cap)) c.fd.reset();
    }
  }
  AE_ASSIGN(ExitStatus st, env.Wait());
  static_cast<ExitStatus&>(res) = st;
  res.duration = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  return res;
}

}  // namespace agentenv::runner
