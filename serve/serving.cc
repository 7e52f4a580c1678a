#include "serve/serving.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

namespace agentenv::serve {

Result<std::unique_ptr<Serving>> Serving::Signals(control::Server& server, const std::vector<int>& signals) {
  std::unique_ptr<Serving> s(new Serving(server));
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  s->signals_.reset(::signalfd(-1, &set, SFD_CLOEXEC));
  if (!s->signals_) return FailErrno("signalfd", errno);
  return s;
}

Result<std::unique_ptr<Serving>> Serving::Start(control::Server& server, ServeOptions opt) {
  AE_ASSIGN(auto s, Signals(server, opt.signals));
  for (auto& [path, handler] : opt.sockets) {
    AE_ASSIGN(auto sock, SocketServer::Listen(path, std::move(handler)));
    s->sockets_.push_back(std::move(sock));
  }
  AE_TRY(server.repo().HoldLock());
  if (opt.capture) AE_TRY(server.StartCapture(*opt.capture));
  for (auto& sock : s->sockets_) sock->Accept();
  return s;
}

Serving::~Serving() { Stop(false); }

int Serving::WaitSignal() {
  signalfd_siginfo si{};
  for (;;) {
    ssize_t n = ::read(signals_.get(), &si, sizeof si);
    if (n == sizeof si) return int(si.ssi_signo);
    if (n < 0 && errno != EINTR) return SIGTERM;
  }
}

void Serving::Stop(bool deliver_pending) {
  if (stopped_) return;
  stopped_ = true;
  server_.StopCapture(deliver_pending);
  for (auto& s : sockets_) s->Stop();
}

}  // namespace agentenv::serve
