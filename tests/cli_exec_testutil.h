// Shared by the tests of the process commands (exec ops, shell): a busybox
// repository owned by uid 65534 and running the agentenv binary as that
// user (the features are rootless; a non-root caller runs them as itself),
// or, for the tests that hold as both, owned by and run as root.
#pragma once

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {


// argv prefix that drops to uid/gid 65534 when we are root.
inline std::vector<std::string> AsNobody(std::vector<std::string> argv) { return Prefixed(As::kNobody, std::move(argv)); }

inline CmdResult Run(const fs::path& root, std::vector<std::string> args, int timeout_ms = 60000) {
  return RunAs(As::kNobody, root, std::move(args), timeout_ms);
}

// A repository whose tree is busybox, made by and owned by `as` (65534
// when we are root, unless kRoot), plus `files` (path -> content) with an
// mtime in 2023: init's restore of the live tree caches their stat (they
// are past the racy window), so the first snapshot after it reads none of
// them.
inline fs::path BusyboxRepo(const TempDir& tmp, const std::map<std::string, std::string>& files = {},
                            As as = As::kNobody) {
  fs::path src = tmp / "src";
  for (const char* d : {"bin", "proc", "dev", "sys", "etc", "tmp", "root", "run"}) fs::create_directories(src / d);
  fs::copy_file("/bin/busybox", src / "bin/busybox");
  for (const char* a : {"sh", "echo", "cat", "sleep", "ls", "printf", "pwd", "mkdir", "head", "yes", "wc", "tr", "true", "stty"})
    fs::create_symlink("busybox", src / "bin" / a);
  WriteFile(src / "etc/hosts", "");
  for (const auto& [path, content] : files) {
    WriteFile(src / path, content);
    struct timespec ts[2] = {{1'700'000'000, 0}, {1'700'000'000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (src / path).c_str(), ts, 0) == 0);
  }
  if (as == As::kNobody && ::geteuid() == 0) {
    REQUIRE(::chown(tmp.path().c_str(), 65534, 65534) == 0);
    for (auto& e : fs::recursive_directory_iterator(src)) REQUIRE(::lchown(e.path().c_str(), 65534, 65534) == 0);
    REQUIRE(::chown(src.c_str(), 65534, 65534) == 0);
  }
  fs::path root = tmp / "repo";
  CmdResult r = RunAs(as, root, {"init", "--from", src.string()}, 60000);
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return root;
}

// Writes a file in a BusyboxRepo's tree as the user the binary runs as
// (uid 65534 when the tests run as root), so that user can read it back.
inline void WriteOwned(const fs::path& p, const std::string& data) {
  WriteFile(p, data);
  if (::geteuid() == 0) REQUIRE(::lchown(p.c_str(), 65534, 65534) == 0);
}

// `agentenv daemon` as `as`, ready (its socket answers) once constructed,
// stopped with SIGTERM on destruction; its stderr is <root>/../daemon.log.
class DaemonAs {
 public:
  DaemonAs(As as, const fs::path& root, std::vector<std::string> extra = {}) : root_(root) {
    std::vector<std::string> argv = {AGENTENV_BIN, "daemon", "--root", root.string(), "--quiet-ms", "100"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_.Start(Prefixed(as, argv), false, false,
                 (root.parent_path() / "daemon.log").string());
    bool ready = WaitFor([&] {
      SocketClient c;
      return c.Connect(root_ / "agentenv.sock") && c.Call(R"({"op":"head"})", 2000).value("ok", false);
    }, 15000);
    INFO(ReadFile(root.parent_path() / "daemon.log"));
    REQUIRE(ready);
  }
  Child& child() { return child_; }
  fs::path LogPath() const { return root_.parent_path() / "daemon.log"; }
  std::string Log() const { return ReadFile(LogPath()); }
  ~DaemonAs() {
    child_.Signal(SIGTERM);
    if (child_.Wait(10000) < 0) child_.Kill();
  }

 private:
  fs::path root_;
  Child child_;
};

// `agentenv daemon` as 65534 (when we are root).
class NobodyDaemon : public DaemonAs {
 public:
  explicit NobodyDaemon(const fs::path& root, std::vector<std::string> extra = {})
      : DaemonAs(As::kNobody, root, std::move(extra)) {}
};

// One request to the socket at <root>/agentenv.sock; its response.
inline json Request(const fs::path& root, const std::string& op, const json& args) {
  SocketClient c;
  REQUIRE(c.Connect(root / "agentenv.sock"));
  return c.Call(json{{"op", op}, {"args", args}}.dump(), 30000);
}

}  // namespace agentenv::test
