// A real rootfs needs its scratch and runtime directories: /tmp, /var/tmp
// and /run are ignored (their contents are never versioned) but the
// directories themselves are kept, with their modes, through init, restore
// and export; each run gets a fresh tmpfs on /tmp and /run; apt works
// inside, as root and rootless.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include "cli_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {


// `agentenv exec [flags] -- sh -c LINE` (--root before the "--").
CmdResult Exec(const fs::path& root, const std::vector<std::string>& flags, const std::string& line) {
  std::vector<std::string> argv = {AGENTENV_BIN, "exec", "--root", root.string()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const char* a : {"--", "/bin/sh", "-c"}) argv.push_back(a);
  argv.push_back(line);
  return RunCmd(argv);
}

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// A small rootfs with the scratch directories a real one has, busy inside.
fs::path MakeTree(const TempDir& tmp) {
  fs::path src = tmp.path() / "src";
  for (const char* d : {"etc", "bin", "tmp", "var/tmp", "run/lock", "proc", "sys", "dev"}) fs::create_directories(src / d);
  WriteFile(src / "etc/os-release", "ID=test\n");
  WriteFile(src / "tmp/leftover", "scratch\n");
  WriteFile(src / "var/tmp/cache", "scratch\n");
  WriteFile(src / "run/lock/pid", "1\n");
  REQUIRE(::chmod((src / "tmp").c_str(), 01777) == 0);
  REQUIRE(::chmod((src / "var/tmp").c_str(), 01777) == 0);
  fs::copy_file("/bin/busybox", src / "bin/busybox");
  for (const char* a : {"sh", "cat", "stat", "mkdir", "grep", "ls", "wc", "echo"})
    fs::create_symlink("busybox", src / "bin" / a);
  return src;
}

TEST_CASE("cli rootfs: init --from keeps /tmp, /var/tmp and /run empty with their modes, and exports carry them", "[cli][rootfs]") {
  TempDir tmp;
  fs::path src = MakeTree(tmp);
  fs::path root = tmp.path() / "repo";
  CmdResult init = Agentenv(root, {"init", "--from", src.string()});
  REQUIRE(init.code == 0);
  fs::path w = Work(root);
  for (const char* d : {"tmp", "var/tmp", "run", "proc", "sys", "dev"}) {
    INFO(d);
    CHECK(fs::is_directory(w / d));
    CHECK(fs::is_empty(w / d));  // contents are not versioned
  }
  CHECK(ModeOf(w / "tmp") == 01777);
  CHECK(ModeOf(w / "var/tmp") == 01777);
  CHECK(AgentenvJson(root, {"status"}).value("dirty", true) == false);

  // Work inside them is never a change.
  WriteFile(w / "tmp/build.o", "object\n");
  fs::create_directories(w / "run/user/0");
  CHECK(AgentenvJson(root, {"snap"}).value("created", true) == false);

  // Exported as empty directories with their modes; GNU tar restores them.
  fs::path tar = tmp.path() / "out.tar";
  REQUIRE(Agentenv(root, {"export", "HEAD", "-o", tar.string()}).code == 0);
  fs::path x = tmp.path() / "x";
  fs::create_directories(x);
  CmdResult ex = RunCmd({"/usr/bin/tar", "-xpf", tar.string(), "-C", x.string()});
  REQUIRE(ex.code == 0);
  CHECK(fs::is_directory(x / "tmp"));
  CHECK(fs::is_empty(x / "tmp"));
  CHECK(ModeOf(x / "tmp") == 01777);
  CHECK(fs::is_directory(x / "run"));
  CHECK(fs::is_empty(x / "run"));
  CHECK(fs::exists(x / "etc/os-release"));
}

TEST_CASE("cli rootfs: exec gets a fresh tmpfs on /tmp and /run, nothing written there reaches the tree", "[cli][rootfs]") {
  TempDir tmp;
  fs::path src = MakeTree(tmp);
  fs::path root = tmp.path() / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", src.string()}).code == 0);
  CmdResult r = Exec(root, {}, "echo hi > /tmp/x && cat /tmp/x && stat -c %a /tmp && mkdir -p /run/app && "
                              "grep -c ' /tmp tmpfs ' /proc/mounts");
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  CHECK(r.out == "hi\n1777\n1\n");
  CHECK_FALSE(fs::exists(Work(root) / "tmp/x"));
  CHECK_FALSE(fs::exists(Work(root) / "run/app"));
  // The next run starts with an empty /tmp.
  r = Exec(root, {"--no-snap"}, "ls -A /tmp | wc -l");
  CHECK(r.out == "0\n");
  CHECK(AgentenvJson(root, {"status"}).value("dirty", true) == false);
}

TEST_CASE("cli rootfs: a restore never removes an ignored directory, even to a node without it", "[cli][rootfs]") {
  TempDir tmp;
  fs::path src = MakeTree(tmp);
  fs::path root = tmp.path() / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", src.string()}).code == 0);
  std::string before = HeadId(root);
  // A directory that becomes ignored later: nodes before that lack it.
  fs::create_directories(Work(root) / "scratch");
  WriteFile(Work(root) / "scratch/data", "keep me\n");
  WriteFile(root / "ignore", "/scratch\n");
  json s = AgentenvJson(root, {"snap", "-m", "scratch ignored"});
  REQUIRE(s.value("created", false));  // the placeholder is new
  REQUIRE(Agentenv(root, {"restore", before}).code == 0);
  CHECK(ReadFile(Work(root) / "scratch/data") == "keep me\n");
  CHECK(fs::is_directory(Work(root) / "tmp"));
}

}  // namespace
}  // namespace agentenv::test

namespace agentenv::test {
namespace {

// The debootstrap bookworm rootfs the benchmarks use, built once (a few
// minutes, needs root and the Debian mirror) and cached outside the
// repository; skipped visibly when it cannot be had.
fs::path DebianRootfs() {
  const char* env = std::getenv("AGENTENV_TEST_ROOTFS");
  fs::path dir = env && *env ? env : "/var/tmp/agentenv-bench/rootfs";
  if (fs::exists(dir / ".agentenv-bench-complete")) return dir;
  if (::geteuid() != 0) Skip("no debootstrap rootfs at " + dir.string() + " and building one needs root");
  CmdResult made = RunCmd({"/bin/bash", std::string(AGENTENV_SOURCE_DIR) + "/bench/make_rootfs.sh", dir.string()}, "",
                          800000);
  if (made.code != 0) Skip("could not build a debootstrap rootfs (no network to the Debian mirror?): " + made.err);
  return dir;
}

// apt inside: update the lists, install jq, run it. Skips when the mirror
// cannot be reached from inside (the env shares the host's network).
void AptInstallsJq(const std::vector<std::string>& as, const fs::path& root) {
  std::vector<std::string> argv = as;
  for (const std::string& a : {std::string(AGENTENV_BIN), std::string("exec"), std::string("--root"), root.string(),
                               std::string("--"), std::string("/bin/sh"), std::string("-c"),
                               std::string("apt-get update -qq && apt-get install -y -qq jq && jq --version")})
    argv.push_back(a);
  CmdResult r = RunCmd(argv, "", 600000);
  INFO(r.Describe());
  if (r.code != 0 && r.err.find("Temporary failure resolving") != std::string::npos) Skip("no network to the Debian mirror");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("jq-1.6") != std::string::npos);
  CHECK(fs::exists(Work(root) / "usr/bin/jq"));
  json log = AgentenvJson(root, {"log", "-n", "1"});
  // The label leads with the packages the command installed, then names it.
  std::string title = log["nodes"][0].value("title", "");
  CHECK(title.starts_with("apt +jq 1.6"));
  CHECK(title.find("; exec: apt-get update") != std::string::npos);
}

}  // namespace

TEST_CASE("cli rootfs: apt-get update and install work inside a debootstrap rootfs, as root", "[cli][rootfs][apt][slow]") {
  if (::geteuid() != 0) Skip("as root: needs root");
  fs::path rootfs = DebianRootfs();
  TempDir tmp;
  fs::path root = tmp.path() / "repo";
  CmdResult init = Agentenv(root, {"init", "--from", rootfs.string()}, 300000);
  INFO(init.Describe());
  REQUIRE(init.code == 0);
  CHECK(ModeOf(Work(root) / "tmp") == 01777);
  AptInstallsJq({}, root);
}

TEST_CASE("cli rootfs: apt-get update and install work inside a debootstrap rootfs, rootless", "[cli][rootfs][apt][slow]") {
  if (::geteuid() != 0) Skip("needs root to prepare the rootfs tarball and switch to uid 65534");
  fs::path rootfs = DebianRootfs();
  TempDir tmp;
  REQUIRE(::chown(tmp.path().c_str(), 65534, 65534) == 0);
  fs::path tar = tmp.path() / "rootfs.tar";
  REQUIRE(RunCmd({"/usr/bin/tar", "-C", rootfs.string(), "--numeric-owner", "-cf", tar.string(), "."}, "", 300000).code == 0);
  REQUIRE(::chown(tar.c_str(), 65534, 65534) == 0);
  const std::vector<std::string> nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  fs::path root = tmp.path() / "repo";
  std::vector<std::string> init = nobody;
  for (const std::string& a : {std::string(AGENTENV_BIN), std::string("init"), std::string("--root"), root.string(),
                               std::string("--tarball"), tar.string()})
    init.push_back(a);
  CmdResult made = RunCmd(init, "", 300000);
  INFO(made.Describe());
  REQUIRE(made.code == 0);
  AptInstallsJq(nobody, root);
}

}  // namespace agentenv::test
