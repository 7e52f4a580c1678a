// Shared by the end-to-end tests of the agentenv binary: running it (once,
// or in the background with pipes; as root or as uid 65534), talking to the
// daemon's socket, and manifests of a tree for comparing it with an earlier
// state.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "tests/testutil.h"

#ifndef AGENTENV_BIN
#error "AGENTENV_BIN must name the agentenv binary under test"
#endif

namespace agentenv::test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct CmdResult {
  int code = -1;  // exit status; 128+N when killed by signal N
  std::string out, err;

  // stdout as one JSON object; a null json (and a failed CHECK) when it is not.
  json Json() const {
    json j = json::parse(out, nullptr, false);
    CHECK_FALSE(j.is_discarded());
    return j.is_discarded() ? json() : j;
  }
  std::string Describe() const {
    return "exit " + std::to_string(code) + "\nstdout: " + out + "\nstderr: " + err;
  }
};

inline void IgnoreSigpipe() {
  static bool once = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)once;
}

// A child process with optional pipes to its stdin and stdout; stderr goes to
// `err_file` (or a pipe read by Run). Killed (SIGKILL) and reaped on destruction.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Kill(); }

  // Errors are test failures: spawning must work. Catch2 is reached only
  // on a failure, so a thread other than the test's may run commands (its
  // assertions are not thread-safe: a passing REQUIRE writes its state too).
  void Start(const std::vector<std::string>& argv, bool pipe_in, bool pipe_out, const std::string& err_file = "",
             bool pipe_err = false) {
    IgnoreSigpipe();
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if ((pipe_in && ::pipe2(in, O_CLOEXEC) != 0) || (pipe_out && ::pipe2(out, O_CLOEXEC) != 0) ||
        (pipe_err && ::pipe2(err, O_CLOEXEC) != 0))
      FAIL("pipe2: " << std::strerror(errno));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) FAIL("fork: " << std::strerror(errno));
    if (pid_ == 0) {
      int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(pipe_in ? in[0] : devnull, 0);
      ::dup2(pipe_out ? out[1] : devnull, 1);
      if (pipe_err) {
        ::dup2(err[1], 2);
      } else if (!err_file.empty()) {
        int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ::dup2(fd >= 0 ? fd : devnull, 2);
      } else {
        ::dup2(devnull, 2);
      }
      ::execv(args[0], args.data());
      _exit(127);
    }
    if (pipe_in) ::close(in[0]), in_.reset(in[1]);
    if (pipe_out) ::close(out[1]), out_.reset(out[0]);
    if (pipe_err) ::close(err[1]), err_.reset(err[0]);
  }

  pid_t pid() const { return pid_; }
  int in() const { return in_.get(); }
  int out() const { return out_.get(); }
  int err() const { return err_.get(); }
  void CloseIn() { in_.reset(); }

  bool Signal(int sig) { return pid_ > 0 && ::kill(pid_, sig) == 0; }

  // Exit code (128+signal when killed), or -1 when it did not end in time.
  int Wait(int timeout_ms) {
    int st = 0;
    if (pid_ <= 0 || !WaitChild(pid_, timeout_ms, &st)) return -1;
    pid_ = -1;
    return ExitCode(st);
  }

  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }

  // One line from stdout ("" and false on EOF or timeout).
  bool ReadLine(std::string* line, int timeout_ms) {
    return ReadLineFrom(out_.get(), &out_buf_, line, timeout_ms);
  }
  bool WriteAll(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      ssize_t n = ::write(in_.get(), s.data() + done, s.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  }

  static bool ReadLineFrom(int fd, std::string* buf, std::string* line, int timeout_ms) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      size_t nl = buf->find('\n');
      if (nl != std::string::npos) {
        *line = buf->substr(0, nl);
        buf->erase(0, nl + 1);
        return true;
      }
      int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (left <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, left);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char chunk[65536];
      ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf->append(chunk, size_t(n));
    }
  }

 private:
  pid_t pid_ = -1;
  UniqueFd in_, out_, err_;
  std::string out_buf_;
};

// Runs argv to completion with `input` on stdin; kills it after timeout_ms.
inline CmdResult RunCmd(const std::vector<std::string>& argv, const std::string& input = "",
                        int timeout_ms = 60000) {
  Child c;
  c.Start(argv, true, true, "", true);
  CmdResult res;
  size_t written = 0;
  if (input.empty()) c.CloseIn();
  bool out_open = true, err_open = true;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out_open || err_open) {
    pollfd p[3] = {{out_open ? c.out() : -1, POLLIN, 0}, {err_open ? c.err() : -1, POLLIN, 0},
                   {written < input.size() ? c.in() : -1, POLLOUT, 0}};
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) {
      c.Kill();
      res.err += "\n[killed: timed out after " + std::to_string(timeout_ms) + " ms]";
      res.code = -1;
      return res;
    }
    int r = ::poll(p, 3, left);
    if (r < 0 && errno == EINTR) continue;
    char chunk[65536];
    for (int i = 0; i < 2; ++i) {
      if (!p[i].revents) continue;
      ssize_t n = ::read(p[i].fd, chunk, sizeof chunk);
      if (n > 0) (i == 0 ? res.out : res.err).append(chunk, size_t(n));
      else if (n == 0 || errno != EINTR) (i == 0 ? out_open : err_open) = false;
    }
    if (p[2].revents) {
      ssize_t n = ::write(c.in(), input.data() + written, input.size() - written);
      if (n > 0) written += size_t(n);
      if (n < 0 && errno != EINTR) written = input.size();
      if (written >= input.size()) c.CloseIn();
    }
  }
  res.code = c.Wait(timeout_ms);
  return res;
}

// `agentenv <args...> --root <root>`.
inline CmdResult Agentenv(const fs::path& root, std::vector<std::string> args, int timeout_ms = 60000) {
  args.insert(args.begin(), AGENTENV_BIN);
  args.push_back("--root");
  args.push_back(root.string());
  return RunCmd(args, "", timeout_ms);
}

// Same with --json; the result must be a JSON object.
inline json AgentenvJson(const fs::path& root, std::vector<std::string> args, int* code = nullptr) {
  args.push_back("--json");
  CmdResult r = Agentenv(root, std::move(args));
  INFO(r.Describe());
  if (code) *code = r.code;
  return r.Json();
}

// Who runs the binary: root, or uid 65534 (rootless, through setpriv) when
// we are root; a caller that is not root runs the binary as itself for
// kNobody.
enum class As { kRoot, kNobody };

inline std::string ModeName(As as) { return as == As::kRoot ? "root" : "uid 65534"; }

// The users a test case that must hold for both runs the binary as, one per
// run of the test case (`GENERATE(from_range(Users()))`): root and uid 65534
// when we are root, else only the caller itself (kNobody).
inline std::vector<As> Users() {
  if (::geteuid() != 0) return {As::kNobody};
  return {As::kRoot, As::kNobody};
}

// argv run as `as`.
inline std::vector<std::string> Prefixed(As as, std::vector<std::string> argv) {
  if (as == As::kRoot || ::geteuid() != 0) return argv;
  std::vector<std::string> p = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  p.insert(p.end(), argv.begin(), argv.end());
  return p;
}

// `agentenv args... --root root` (before a "--"), as `as`.
inline std::vector<std::string> AgentenvArgv(As as, const fs::path& root, std::vector<std::string> args) {
  auto at = std::find(args.begin(), args.end(), "--");
  at = args.insert(at, {"--root", root.string()});
  args.insert(args.begin(), AGENTENV_BIN);
  return Prefixed(as, args);
}

inline CmdResult RunAs(As as, const fs::path& root, std::vector<std::string> args, int timeout_ms = 120000) {
  return RunCmd(AgentenvArgv(as, root, std::move(args)), "", timeout_ms);
}

// HEAD's full id, read by `agentenv head --json` ("" when there is none).
inline std::string HeadId(const fs::path& root) {
  json j = AgentenvJson(root, {"head"});
  return j.is_object() && j.contains("node") ? j["node"].value("id", "") : "";
}

inline void WriteFile(const fs::path& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << data;
  REQUIRE(f.good());
}

// The live tree of the repository at `root`.
inline fs::path Work(const fs::path& root) { return root / "work" / "current"; }

inline std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A size-limited tmpfs at `dir`, unmounted on destruction (root only).
class SmallTmpfs {
 public:
  SmallTmpfs(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = RunCmd({"/bin/mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", dir.string()}).code == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) RunCmd({"/bin/umount", "-l", dir_.string()});
  }
  bool mounted() const { return mounted_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
};

// Fills the filesystem of `dir` with `dir`/fill until ENOSPC, then gives
// `leave` bytes of it back.
inline void FillUp(const fs::path& dir, off_t leave = 0) {
  UniqueFd fd(::open((dir / "fill").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  std::string mb(1 << 20, 'f');
  while (::write(fd.get(), mb.data(), mb.size()) > 0) {}
  std::string kb(1024, 'f');
  while (::write(fd.get(), kb.data(), kb.size()) > 0) {}
  while (::write(fd.get(), "f", 1) > 0) {}
  struct stat st;
  REQUIRE(::fstat(fd.get(), &st) == 0);
  REQUIRE(st.st_size > leave);
  REQUIRE(::ftruncate(fd.get(), st.st_size - leave) == 0);
}

// A line-oriented client of the daemon's control socket.
class SocketClient {
 public:
  bool Connect(const fs::path& path) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string s = path.string();
    if (!fd_ || s.size() >= sizeof a.sun_path) return false;
    std::memcpy(a.sun_path, s.c_str(), s.size() + 1);
    return ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  bool Send(const std::string& line) { return SendRaw(line + "\n"); }
  bool SendRaw(const std::string& bytes) {
    return ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
  }
  // The next response; null when none arrives in time or it is not JSON.
  json Receive(int timeout_ms = 10000) {
    std::string line;
    if (!Child::ReadLineFrom(fd_.get(), &buf_, &line, timeout_ms)) return json();
    json j = json::parse(line, nullptr, false);
    return j.is_discarded() ? json() : j;
  }
  json Call(const std::string& line, int timeout_ms = 10000) {
    if (!Send(line)) return json();
    return Receive(timeout_ms);
  }

 private:
  UniqueFd fd_;
  std::string buf_;
};

// A running `agentenv daemon`; stopped with SIGTERM (or killed) on destruction.
class Daemon {
 public:
  Daemon(const fs::path& root, std::vector<std::string> extra) : root_(root) {
    std::vector<std::string> argv = {AGENTENV_BIN, "daemon", "--root", root.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    log_ = root.parent_path() / (root.filename().string() + "-daemon.log");
    child_.Start(argv, false, false, log_.string());
  }
  ~Daemon() {
    if (child_.pid() > 0) {
      child_.Signal(SIGTERM);
      if (child_.Wait(10000) < 0) child_.Kill();
    }
  }
  // True once the socket answers `head` (the baseline capture is done).
  bool WaitReady(int timeout_ms = 15000) {
    return WaitFor([&] {
      if (child_.pid() <= 0) return false;
      SocketClient c;
      if (!c.Connect(root_ / "agentenv.sock")) return false;
      json r = c.Call(R"({"op":"head"})", 2000);
      return r.is_object() && r.value("ok", false);
    }, timeout_ms);
  }
  // SIGTERM, then the exit code (-1: still running after timeout_ms).
  int Stop(int timeout_ms = 15000) {
    child_.Signal(SIGTERM);
    return child_.Wait(timeout_ms);
  }
  Child& child() { return child_; }
  std::string Log() const { return ReadFile(log_); }

 private:
  fs::path root_, log_;
  Child child_;
};

// `agentenv ctl <op> <kv...> --json` result (the "ok" object), null on failure.
inline json Ctl(const fs::path& root, const std::string& op, std::vector<std::string> kv = {}) {
  std::vector<std::string> args = {"ctl", op};
  args.insert(args.end(), kv.begin(), kv.end());
  args.push_back("--json");
  CmdResult r = Agentenv(root, args);
  json j = json::parse(r.out, nullptr, false);
  if (r.code != 0 || j.is_discarded()) {
    UNSCOPED_INFO("ctl " + op + ": " + r.Describe());
    return json();
  }
  return j;
}

inline uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// user.* extended attributes of path (not following symlinks), sorted.
inline std::string XattrText(const fs::path& p) {
  char names[4096];
  ssize_t n = ::llistxattr(p.c_str(), names, sizeof names);
  if (n <= 0) return "";
  std::vector<std::string> list;
  for (ssize_t i = 0; i < n; i += ssize_t(std::strlen(names + i)) + 1) {
    std::string name = names + i;
    if (name.rfind("user.", 0) != 0) continue;
    char val[4096];
    ssize_t m = ::lgetxattr(p.c_str(), name.c_str(), val, sizeof val);
    list.push_back(name + "=" + std::string(val, m > 0 ? size_t(m) : 0));
  }
  std::sort(list.begin(), list.end());
  std::string out;
  for (const auto& s : list) out += " " + s;
  return out;
}

// path (relative) -> "type mode size hash target xattrs" for every entry
// below root; the root itself is "." (mode only).
using Manifest = std::map<std::string, std::string>;

inline Manifest TreeManifest(const fs::path& root) {
  Manifest m;
  std::function<void(const fs::path&, const std::string&)> walk = [&](const fs::path& dir, const std::string& rel) {
    for (const auto& e : fs::directory_iterator(dir)) {
      std::string r = rel.empty() ? e.path().filename().string() : rel + "/" + e.path().filename().string();
      struct stat st;
      if (::lstat(e.path().c_str(), &st) != 0) continue;
      std::ostringstream d;
      d << std::oct << (st.st_mode & 07777) << std::dec;
      if (S_ISREG(st.st_mode)) {
        d << " file " << st.st_size << " " << std::hex << Fnv1a(ReadFile(e.path()));
      } else if (S_ISDIR(st.st_mode)) {
        d << " dir";
      } else if (S_ISLNK(st.st_mode)) {
        d << " link " << fs::read_symlink(e.path()).string();
      } else {
        d << " other " << (st.st_mode & S_IFMT);
      }
      d << XattrText(e.path());
      m[r] = d.str();
      if (S_ISDIR(st.st_mode)) walk(e.path(), r);
    }
  };
  walk(root, "");
  return m;
}

// A readable list of differences (empty: equal).
inline std::string ManifestDiff(const Manifest& want, const Manifest& got, size_t max = 20) {
  std::string out;
  size_t n = 0;
  for (const auto& [p, d] : want) {
    auto it = got.find(p);
    if (it == got.end()) out += "missing  " + p + " (" + d + ")\n", ++n;
    else if (it->second != d) out += "differs  " + p + ": want " + d + ", got " + it->second + "\n", ++n;
    if (n >= max) return out + "...\n";
  }
  for (const auto& [p, d] : got) {
    if (!want.count(p)) out += "extra    " + p + " (" + d + ")\n", ++n;
    if (n >= max) return out + "...\n";
  }
  return out;
}

// An `agentenv mcp` process spoken to line by line; `prefix` runs it
// through another program (e.g. setpriv to drop privileges).
class Mcp {
 public:
  explicit Mcp(const fs::path& root, std::vector<std::string> prefix = {}) {
    prefix.insert(prefix.end(), {AGENTENV_BIN, "mcp", "--root", root.string()});
    child_.Start(prefix, true, true, (root.parent_path() / "mcp.log").string());
  }
  ~Mcp() {
    child_.CloseIn();
    if (child_.Wait(5000) < 0) child_.Kill();
  }
  // Sends a request and returns its reply; notifications read meanwhile
  // are kept in notes().
  json Request(const std::string& method, const json& params) {
    json msg = {{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}};
    if (!child_.WriteAll(msg.dump() + "\n")) return json();
    return Await(id_);
  }
  // Sends without waiting; returns the id.
  int Send(const std::string& method, const json& params) {
    json msg = {{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}};
    child_.WriteAll(msg.dump() + "\n");
    return id_;
  }
  // The reply to request `id` (replies to others read meanwhile are kept
  // for their own Await); null when none comes in time.
  json Await(int id, int timeout_ms = 30000) {
    if (auto it = replies_.find(id); it != replies_.end()) {
      json r = it->second;
      replies_.erase(it);
      return r;
    }
    for (std::string line; child_.ReadLine(&line, timeout_ms);) {
      json r = json::parse(line, nullptr, false);
      if (r.is_discarded()) return json();
      if (!r.contains("id")) {
        notes_.push_back(r);
        continue;
      }
      if (r["id"] == id) return r;
      replies_[r["id"].is_number_integer() ? r["id"].get<int>() : -1] = r;
    }
    return json();
  }
  json Initialize() {
    return Request("initialize", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                                  {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  }
  const std::vector<json>& notes() const { return notes_; }
  void Notify(const std::string& method) {
    child_.WriteAll(json{{"jsonrpc", "2.0"}, {"method", method}}.dump() + "\n");
  }
  json Call(const std::string& tool, const json& args) {
    return Request("tools/call", {{"name", tool}, {"arguments", args}});
  }
  Child& child() { return child_; }

 private:
  Child child_;
  int id_ = 0;
  std::map<int, json> replies_;
  std::vector<json> notes_;
};

// One entry of a hand-built ustar archive (written byte by byte, so the
// tests can make archives no well-behaved tar would: hardlinks with data,
// absolute names, "..").
struct TarEntry {
  std::string name;
  char type = '0';   // '0' file, '1' hardlink, '2' symlink, '3' char device, '5' directory
  std::string link;  // symlink or hardlink target
  std::string data;
  unsigned major = 0, minor = 0;
  bool pax = false;  // precede it with a pax header (libarchive then honours data on hardlinks)
};

inline void Octal(char* field, size_t width, uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llo", int(width - 1), (unsigned long long)v);
  std::memcpy(field, buf, width - 1);  // the last byte stays NUL
}

inline void WriteTar(const fs::path& path, const std::vector<TarEntry>& given) {
  std::vector<TarEntry> entries;
  for (const auto& e : given) {
    if (e.pax) entries.push_back({"PaxHeader/x", 'x', "", "15 comment=pax\n"});
    entries.push_back(e);
  }
  std::string out;
  for (const auto& e : entries) {
    char h[512] = {};
    REQUIRE(e.name.size() < 100);
    REQUIRE(e.link.size() < 100);
    std::memcpy(h, e.name.data(), e.name.size());
    Octal(h + 100, 8, e.type == '5' ? 0755 : 0644);
    Octal(h + 108, 8, 0);
    Octal(h + 116, 8, 0);
    Octal(h + 124, 12, e.data.size());
    Octal(h + 136, 12, 1700000000);
    h[156] = e.type;
    std::memcpy(h + 157, e.link.data(), e.link.size());
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    Octal(h + 329, 8, e.major);
    Octal(h + 337, 8, e.minor);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
    out.append(h, 512);
    out += e.data;
    out.append((512 - e.data.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  WriteFile(path, out);
}


}  // namespace agentenv::test
