// The daemon's control socket (serve/socket.cc): the input is what a
// client writes to <root>/agentenv.sock, one request per line, served by
// SocketServer with CallJson behind it (fuzz_ops.h: read-only operations
// run, the others only have their arguments read) on a small repository.
// Every line must get exactly one reply (after the frames of a streaming
// op; replies of different lines in any order), each a JSON object on its
// own line, and the connection stays open: a `head` sent once every reply
// is in must succeed.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "control/open_repo.h"
#include "serve/socket.h"
#include "fuzz/fuzz_env.h"
#include "fuzz/fuzz_ops.h"
#include "fuzz/fuzz_repo.h"
#include "snap/layout.h"

namespace {

using namespace agentenv;
using control::json;

std::unique_ptr<control::Server> server;
std::unique_ptr<serve::SocketServer> socket_server;
std::string socket_path;
UniqueFd conn;
uint64_t sent = 0;  // inputs so far

UniqueFd Connect() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fuzz::Die("connect " + socket_path);
  return fd;
}

// The non-blank lines of `out`: the requests the server answers.
size_t Requests(const std::string& out) {
  size_t n = 0;
  for (size_t pos = 0, nl; (nl = out.find('\n', pos)) != std::string::npos; pos = nl + 1)
    if (out.substr(pos, nl - pos).find_first_not_of(" \t\r") != std::string::npos) ++n;
  return n;
}

// Writes `out` and reads reply lines until `answers` of them are replies
// (frames come before their reply); returns the lines.
std::vector<std::string> Exchange(const std::string& out, size_t answers) {
  std::vector<std::string> lines;
  std::string in;
  size_t written = 0, replies = 0;
  char buf[65536];
  int quiet_s = 0;  // since the last reply byte or the last byte sent
  while (replies < answers) {
    pollfd p{conn.get(), short(POLLIN | (written < out.size() ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 10000) <= 0) {
      // A loaded machine can hold every thread off the CPU for a while: a
      // minute of silence is told (a stall), ten are a hang.
      quiet_s += 10;
      std::string state = std::to_string(answers) + " requests, " + std::to_string(replies) + " replies, " +
                          std::to_string(written) + "/" + std::to_string(out.size()) + " bytes sent";
      if (quiet_s >= 600) fuzz::Die(state + " after 600 s without a byte");
      if (quiet_s % 60 == 0) std::fprintf(stderr, "socket fuzzer: stalled %d s: %s\n", quiet_s, state.c_str());
      continue;
    }
    quiet_s = 0;
    if (p.revents & POLLOUT) {
      ssize_t n = ::send(conn.get(), out.data() + written, out.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) written += size_t(n);
    }
    if (!(p.revents & (POLLIN | POLLHUP))) continue;
    ssize_t n = ::recv(conn.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) fuzz::Die("the socket server closed the connection");
    if (n < 0) continue;
    in.append(buf, size_t(n));
    for (size_t nl; (nl = in.find('\n')) != std::string::npos;) {
      lines.push_back(in.substr(0, nl));
      in.erase(0, nl + 1);
      auto j = json::parse(lines.back(), nullptr, false);
      FUZZ_CHECK(j.is_object(), "a reply line that is not a JSON object: " + lines.back());
      if (!j.contains("frame")) {
        FUZZ_CHECK(j.contains("ok") && j["ok"].is_boolean(), "a reply without ok: " + lines.back());
        ++replies;
      }
    }
  }
  FUZZ_CHECK(in.empty(), "more reply bytes than requests: " + in);
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::ConfineWrites(*argc, *argv);
  std::string root = fuzz::WorkDir() + "/repo";
  fuzz::MakeRepository(root);
  auto repo = control::OpenRepo(root);
  if (!repo) fuzz::Die(repo.error().message);
  server = std::make_unique<control::Server>(std::move(*repo));
  socket_path = snap::layout::Socket(root);
  auto s = serve::SocketServer::Listen(socket_path, [](const std::string& op, const json& args,
                                                       const control::CallContext& call) {
    return fuzz::GuardedCall(*server, op, args, call.emit);
  });
  if (!s) fuzz::Die(s.error().message);
  socket_server = std::move(*s);
  socket_server->Accept();
  conn = Connect();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string out(reinterpret_cast<const char*>(data), size);
  out += "\n";  // ends the input's last line
  Exchange(out, Requests(out));
  // Then one more request, which must succeed: every reply is in, so
  // every slot of the connection is free again (an input may send more
  // than kMaxInFlight requests at once, and the extra ones are busy).
  std::string end = "fuzz-end-" + std::to_string(++sent);
  std::vector<std::string> lines = Exchange("{\"id\":\"" + end + "\",\"op\":\"head\"}\n", 1);
  bool answered = false;
  for (const std::string& line : lines) {
    auto j = json::parse(line, nullptr, false);
    answered |= j.value("id", json()) == json(end) && !j.contains("frame") && j.value("ok", false);
  }
  FUZZ_CHECK(answered, "no successful reply to the head request sent after the input's replies: " +
                           (lines.empty() ? std::string() : lines.back()));
  return 0;
}
