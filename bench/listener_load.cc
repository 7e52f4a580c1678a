// The HTTP listener under hostile load: the time of a good request on an
// idle server, then with SLOW connections sending a head one byte a
// second and IDLE connections that send nothing (spread over source
// addresses 127.0.0.2-5, each a peer of its own) and STREAMS unread
// /api/events streams held open, then from the same address as the slow
// ones; and keep-alive round trips. Prints p50/p99 per phase and their
// ratios to the idle phase.
// Usage: listener_load PORT PATH [TOKEN] [SLOW] [IDLE] [REQUESTS] [STREAMS]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port, const char* from) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(uint16_t(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `req` and reads one Content-Length response; false on a failure
// or after 10 s.
bool RoundTrip(int fd, const std::string& req) {
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) return false;
  std::string in;
  size_t need = std::string::npos;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (need == std::string::npos || in.size() < need) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, left) <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in.append(buf, size_t(n));
    size_t end = in.find("\r\n\r\n");
    if (need == std::string::npos && end != std::string::npos) {
      if (in.compare(9, 3, "200") != 0) return false;
      size_t cl = in.find("Content-Length: ");
      need = end + 4 + (cl < end ? std::stoul(in.substr(cl + 16)) : 0);
    }
  }
  return true;
}

struct Stats {
  double p50 = 0, p99 = 0;
  int failed = 0;
};

// `n` good requests, each on a new connection from `from`, 2 at a time,
// each client pausing 20 ms between them (so a phase lasts seconds: the
// slow clients are in the middle of their heads meanwhile).
Stats Measure(int port, const std::string& req, int n, const char* from) {
  std::vector<double> ms(size_t(n), -1);
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&] {
      for (int i; (i = next++) < n;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto t0 = Clock::now();
        int fd = Connect(port, from);
        bool ok = fd >= 0 && RoundTrip(fd, req);
        if (fd >= 0) ::close(fd);
        if (ok) ms[size_t(i)] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
    });
  for (auto& t : ts) t.join();
  Stats s;
  std::vector<double> good;
  for (double v : ms) (v < 0 ? s.failed++ : (good.push_back(v), 0));
  std::sort(good.begin(), good.end());
  if (!good.empty()) {
    s.p50 = good[good.size() / 2];
    s.p99 = good[std::min(good.size() - 1, good.size() * 99 / 100)];
  }
  return s;
}

void Print(const char* phase, const Stats& s, const Stats& base) {
  std::printf("%-44s p50 %7.2f ms  p99 %7.2f ms  failed %3d  ratio p50 %5.2f  p99 %5.2f\n", phase, s.p50, s.p99,
              s.failed, base.p50 > 0 ? s.p50 / base.p50 : 0, base.p99 > 0 ? s.p99 / base.p99 : 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PORT PATH [TOKEN] [SLOW] [IDLE] [REQUESTS] [STREAMS]\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string path = argv[2], token = argc > 3 ? argv[3] : "";
  const int slow = argc > 4 ? std::atoi(argv[4]) : 100, idle = argc > 5 ? std::atoi(argv[5]) : 100;
  const int n = argc > 6 ? std::atoi(argv[6]) : 400;
  const int streams_wanted = argc > 7 ? std::atoi(argv[7]) : 16;
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                          (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") + "\r\n";

  (void)Measure(port, req, 50, "127.0.0.1");  // warm-up: threads, caches
  Stats base = Measure(port, req, n, "127.0.0.1");
  Print("idle server", base, base);

  const char* peers[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
  std::vector<int> slow_fds, idle_fds, streams;
  for (int i = 0; i < slow; ++i) slow_fds.push_back(Connect(port, peers[i % 4]));
  for (int i = 0; i < idle; ++i) idle_fds.push_back(Connect(port, peers[i % 4]));
  // Event streams that are never read (the web DVR allows 16).
  const std::string events = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                             (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") + "\r\n";
  for (int i = 0; i < streams_wanted; ++i) {
    int fd = Connect(port, "127.0.0.6");
    if (fd >= 0 && ::send(fd, events.data(), events.size(), MSG_NOSIGNAL) > 0) streams.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const std::string head = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(8000, 'x');
    for (size_t i = 0; !stop && i < head.size(); ++i) {
      for (int fd : slow_fds)
        if (fd >= 0) (void)::send(fd, &head[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int k = 0; k < 100 && !stop; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  char phase[96];
  std::snprintf(phase, sizeof phase, "%d slow + %d idle + %zu event streams open", slow, idle, streams.size());
  Print(phase, Measure(port, req, n, "127.0.0.1"), base);
  Print("  ... from the slow clients' own address", Measure(port, req, n / 4, peers[0]), base);
  int open_after = 0;
  for (int fd : slow_fds) {
    pollfd p{fd, POLLIN, 0};
    char c;
    open_after += fd >= 0 && !(::poll(&p, 1, 0) == 1 && ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0);
  }
  std::printf("slow connections still open after the requests: %d of %d\n", open_after, slow);
  stop = true;
  trickle.join();
  for (int fd : slow_fds) ::close(fd);
  for (int fd : idle_fds) ::close(fd);
  for (int fd : streams) ::close(fd);

  int fd = Connect(port, "127.0.0.1");
  const int rounds = 200;
  int ok = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < rounds; ++i) ok += RoundTrip(fd, req);
  double per = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / rounds;
  ::close(fd);
  std::printf("keep-alive round trip: %.3f ms (%d of %d ok)\n", per, ok, rounds);
  return 0;
}
