// Shared by the tests of shared on-disk state under concurrency and kill -9
// (lowers, workspaces, scratch): a repository of a busybox tree with a few
// thousand files, commands run as root or as uid 65534, a workspace's view
// of its tree compared with its node's export, and a listing of what a
// repository holds besides history.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <regex>

#include "tests/cli_testutil.h"
#include "tests/oci_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {

inline json JsonAs(As as, const fs::path& root, std::vector<std::string> args, int* code = nullptr) {
  args.insert(std::find(args.begin(), args.end(), "--"), "--json");
  CmdResult r = RunAs(as, root, std::move(args));
  if (code) *code = r.code;
  json j = json::parse(r.out, nullptr, false);
  if (j.is_discarded()) UNSCOPED_INFO("not JSON: " + r.Describe());
  return j.is_discarded() ? json() : j;
}

// A source tree: busybox with the applets the checks use, and `files`
// files of a few KiB in nested directories (a first fork takes a few
// hundred ms: wide enough to kill it halfway).
inline fs::path MakeBusyboxTree(const fs::path& dir, int files) {
  for (const char* d : {"bin", "proc", "dev", "sys", "etc", "tmp", "root", "run", "data"}) fs::create_directories(dir / d);
  fs::copy_file("/bin/busybox", dir / "bin/busybox");
  for (const char* a : {"sh", "echo", "cat", "sleep", "ls", "find", "sort", "md5sum", "wc", "true", "mkdir", "dd",
                        "head", "rm", "seq", "xargs", "test"})
    fs::create_symlink("busybox", dir / "bin" / a);
  WriteFile(dir / "etc/hosts", "");
  for (int i = 0; i < files; ++i) {
    fs::path d = dir / "data" / ("d" + std::to_string(i % 37)) / ("e" + std::to_string(i % 5));
    fs::create_directories(d);
    WriteFile(d / ("f" + std::to_string(i)), std::string(1500 + (i * 37) % 3000, char('a' + i % 26)) + std::to_string(i));
  }
  return dir;
}

// Hardlink groups as a rootfs has them (perl and perl5.36.0, gzip and
// uncompress): a group of three in bin/, a pair in data/.
inline void AddHardlinks(const fs::path& dir) {
  WriteFile(dir / "bin/hl-a", "one file, three names\n");
  fs::create_hard_link(dir / "bin/hl-a", dir / "bin/hl-b");
  fs::create_hard_link(dir / "bin/hl-a", dir / "bin/hl-c");
  fs::create_directories(dir / "data/hl");
  WriteFile(dir / "data/hl/x", "one file, two names\n");
  fs::create_hard_link(dir / "data/hl/x", dir / "data/hl/y");
}

// A repository of that tree (with hardlinks when asked), owned by the user
// `as` runs as.
inline fs::path MakeRepoAs(As as, const TempDir& tmp, int files, bool hardlinks = false) {
  fs::path src = MakeBusyboxTree(tmp / "src", files);
  if (hardlinks) AddHardlinks(src);
  if (as == As::kNobody) {
    REQUIRE(::chown(tmp.path().c_str(), 65534, 65534) == 0);
    for (auto& e : fs::recursive_directory_iterator(src)) REQUIRE(::lchown(e.path().c_str(), 65534, 65534) == 0);
    REQUIRE(::chown(src.c_str(), 65534, 65534) == 0);
  }
  fs::path root = tmp / "repo";
  CmdResult r = RunAs(as, root, {"init", "--from", src.string()});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return root;
}

// The listing both views make: every path, then the md5 of each file but
// those an env binds from the host (etc/hosts, etc/resolv.conf).
constexpr const char* kViewScript =
    "find . -xdev | sort && find . -xdev -type f ! -path ./etc/hosts ! -path ./etc/resolv.conf -exec md5sum {} + | sort";

// What a workspace shows: every path below / on its own filesystem, and
// the md5 of each file, as seen from inside by `exec --no-snap`.
inline std::string WorkspaceView(As as, const fs::path& root, const std::string& ws, std::string* err = nullptr) {
  CmdResult r = RunAs(as, root, {"exec", "--workspace", ws, "--no-snap", "--", "/bin/sh", "-c",
                                 std::string("cd / && ") + kViewScript});
  if (err) *err = r.code == 0 ? "" : r.Describe();
  return r.code == 0 ? r.out : "";
}

// The same view of node `ref` from its export, unpacked by GNU tar into a
// scratch directory and listed with the same tools (the mount points the
// env mounts over are empty directories in both). "" and *err set when a
// step fails; no Catch2 assertion, so a worker thread may call it.
inline std::string TryNodeView(As as, const fs::path& root, const std::string& ref, const fs::path& scratch,
                               std::string* err) {
  std::error_code ec;
  fs::remove_all(scratch, ec);
  fs::create_directories(scratch, ec);
  fs::path tar = scratch.string() + ".tar";
  CmdResult e = RunAs(as, root, {"export", ref, "-o", tar.string()});
  if (e.code != 0) return *err = "export " + ref + ": " + e.Describe(), "";
  CmdResult x = RunCmd({"/bin/tar", "-xf", tar.string(), "-C", scratch.string()});
  if (x.code != 0) return *err = "tar -x: " + x.Describe(), "";
  fs::remove(tar, ec);
  // The same busybox tools as inside, from the host's busybox.
  fs::path tools = scratch.string() + ".bin";
  fs::create_directories(tools, ec);
  for (const char* a : {"find", "sort", "md5sum"})
    if (!fs::exists(tools / a, ec)) fs::create_symlink("/bin/busybox", tools / a, ec);
  CmdResult v = RunCmd({"/bin/sh", "-c", "export PATH='" + tools.string() + "'; cd '" + scratch.string() + "' && " +
                                             kViewScript});
  fs::remove_all(tools, ec);
  if (v.code != 0) return *err = "listing the export: " + v.Describe(), "";
  return v.out;
}

// Same, for the test's own thread: a failed step fails the test.
inline std::string NodeView(As as, const fs::path& root, const std::string& ref, const fs::path& scratch) {
  std::string err;
  std::string view = TryNodeView(as, root, ref, scratch, &err);
  if (!err.empty()) FAIL(err);
  return view;
}

// What a repository holds besides history and the live tree's contents:
// the names in lowers/, workspaces/ (and each workspace's top level),
// work/, subvols/ and the root, with ids that vary between runs of the
// same commands (tournament ids, pids) replaced by placeholders.
inline std::set<std::string> RepoListing(const fs::path& root) {
  std::set<std::string> out;
  // A tournament's workspaces: t<id>-<candidate>; which candidate wins
  // (and is kept) depends on which finishes first.
  static const std::regex tournament("t[0-9a-f]{6}-[0-9]+");
  auto add = [&](const std::string& rel) { out.insert(std::regex_replace(rel, tournament, "tID-N")); };
  for (const auto& e : fs::directory_iterator(root)) {
    std::string n = e.path().filename().string();
    if (n == "agentenv.sock") continue;
    add(n);
    if (n != "lowers" && n != "workspaces" && n != "work" && n != "subvols") continue;
    for (const auto& f : fs::directory_iterator(e.path())) {
      std::string rel = n + "/" + f.path().filename().string();
      add(rel);
      if (n == "workspaces" && f.is_directory())
        for (const auto& g : fs::directory_iterator(f.path())) add(rel + "/" + g.path().filename().string());
    }
  }
  return out;
}

// The lines only one of two views has, for a failure message.
inline std::string ViewDiff(const std::string& want, const std::string& got) {
  auto lines = [](const std::string& t) {
    std::set<std::string> out;
    std::istringstream in(t);
    for (std::string l; std::getline(in, l);) out.insert(l);
    return out;
  };
  std::set<std::string> a = lines(want), b = lines(got);
  std::string out;
  size_t n = 0;
  for (const auto& l : a)
    if (!b.count(l) && n++ < 20) out += "  only in the node: " + l + "\n";
  for (const auto& l : b)
    if (!a.count(l) && n++ < 40) out += "  only in the workspace: " + l + "\n";
  return out;
}

inline std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += "  " + x + "\n";
  return out;
}

// Starts argv and SIGKILLs it after `delay_ms` or once `when` holds
// (polled every ms), whichever first; returns false when it ended before.
inline bool KillAfter(const std::vector<std::string>& argv, int delay_ms, const std::function<bool()>& when = {}) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: the kill reaches setpriv's child too
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  bool ended = false;
  WaitFor([&] { return (ended = ::waitpid(pid, nullptr, WNOHANG) == pid) || (when && when()); }, delay_ms, 1);
  if (ended) return false;
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return true;
}

// Whether some entry of `dir` starts with `prefix`.
inline bool HasEntry(const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace agentenv::test
