// Nothing left behind: what a killed init, import or restore leaves is
// refused, removed by the next command, and never recorded in history.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {


// A source tree big enough that init and restore take a few hundred ms.
void MakeTree(const fs::path& dir, int files) {
  for (int i = 0; i < files; ++i) {
    fs::path d = dir / ("d" + std::to_string(i % 40));
    fs::create_directories(d);
    WriteFile(d / ("f" + std::to_string(i)), std::string(2000 + i % 700, char('a' + i % 26)));
  }
}

// Starts `agentenv args --root root` and SIGKILLs it once `when` holds
// (polled every ms); returns false when the command finished first.
bool KillWhen(const fs::path& root, std::vector<std::string> args, const std::function<bool()>& when) {
  args.insert(args.begin(), AGENTENV_BIN);
  args.push_back("--root");
  args.push_back(root.string());
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  bool ended = false;
  const bool held = WaitFor([&] { return (ended = ::waitpid(pid, nullptr, WNOHANG) == pid) || when(); }, 60000, 1);
  if (ended) return false;
  const bool killed = held;  // else a minute passed without `when`: let it finish
  if (killed) ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return killed;
}

size_t CountTemps(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    n += e.path().filename().string().rfind(".agentenv-tmp-", 0) == 0;
  return n;
}

// Paths of an export of `ref`, via GNU tar.
std::string ExportListing(const fs::path& root, const std::string& ref, const fs::path& tmp) {
  fs::path tar = tmp / "listing.tar";
  CmdResult r = Agentenv(root, {"export", ref, "-o", tar.string()});
  REQUIRE(r.code == 0);
  CmdResult t = RunCmd({"/bin/tar", "-tf", tar.string()});
  REQUIRE(t.code == 0);
  fs::remove(tar);
  return t.out;
}

TEST_CASE("leftovers: a killed init leaves a half-made repository that commands refuse and init redoes", "[cli][slow]") {
  TempDir tmp;
  fs::path src = tmp.path() / "src", root = tmp.path() / "repo";
  MakeTree(src, 3000);
  bool caught = false;
  for (int attempt = 0; attempt < 10 && !caught; ++attempt) {
    fs::remove_all(root);
    caught = KillWhen(root, {"init", "-q", "--from", src.string()}, [&] {
      return fs::exists(root / "initializing") && fs::exists(Work(root) / "d1");
    });
  }
  REQUIRE(caught);
  for (std::vector<std::string> cmd : {std::vector<std::string>{"snap"}, {"log"}, {"fsck"}, {"status"}}) {
    CmdResult r = Agentenv(root, cmd);
    INFO(r.Describe());
    CHECK(r.code != 0);
    CHECK(r.err.find("half-made repository") != std::string::npos);
  }
  CmdResult again = Agentenv(root, {"init", "-q", "--from", src.string()});
  INFO(again.Describe());
  REQUIRE(again.code == 0);
  CHECK_FALSE(fs::exists(root / "initializing"));
  json log = AgentenvJson(root, {"log"});
  CHECK(log["nodes"].size() == 1);
  CHECK(Agentenv(root, {"fsck"}).code == 0);
  CHECK(ManifestDiff(TreeManifest(src), TreeManifest(Work(root))).empty());
}

TEST_CASE("leftovers: init failing on a bad source leaves nothing and can be retried", "[cli]") {
  TempDir tmp;
  fs::path root = tmp.path() / "repo";
  CmdResult bad = Agentenv(root, {"init", "--from", (tmp.path() / "missing").string()});
  CHECK(bad.code != 0);
  CHECK_FALSE(fs::exists(root / "meta"));
  CHECK_FALSE(fs::exists(root / "initializing"));
  CHECK(Agentenv(root, {"init", "-q"}).code == 0);
}

TEST_CASE("leftovers: scratch directories of a killed import are removed by the next import and by gc", "[cli]") {
  TempDir tmp;
  fs::path root = tmp.path() / "repo";
  REQUIRE(Agentenv(root, {"init", "-q"}).code == 0);
  auto plant = [&](const std::string& name) {
    fs::path d = root / "work" / name;
    fs::create_directories(d / "tree");
    WriteFile(d / "lock", "");
    WriteFile(d / "tree" / "big", std::string(100000, 'x'));
    return d;
  };
  fs::path stale = plant("import-AbC123");
  // One still in use: its directory is locked (by us, standing in for a
  // running import, which locks the directory it made).
  fs::path busy = plant("import-XyZ789");
  UniqueFd held(::open(busy.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(::flock(held.get(), LOCK_EX) == 0);
  fs::path src = tmp.path() / "src";
  WriteFile((fs::create_directories(src), src / "a"), "a\n");
  fs::path tar = tmp.path() / "a.tar";
  REQUIRE(RunCmd({"/bin/tar", "-C", src.string(), "-cf", tar.string(), "."}).code == 0);
  CmdResult imp = Agentenv(root, {"import", tar.string()});
  INFO(imp.Describe());
  REQUIRE(imp.code == 0);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(busy));
  held.reset();
  fs::path stale2 = plant("pull-Qq1234");
  json gc = AgentenvJson(root, {"gc"});
  CHECK(gc["scratch_removed"] == 2);
  CHECK_FALSE(fs::exists(busy));
  CHECK_FALSE(fs::exists(stale2));
  for (const auto& e : fs::directory_iterator(root / "work")) CHECK(e.path().filename() == "current");
}

TEST_CASE("leftovers: restore temp names are never recorded", "[cli]") {
  TempDir tmp;
  fs::path root = tmp.path() / "repo";
  REQUIRE(Agentenv(root, {"init", "-q"}).code == 0);
  fs::create_directories(Work(root) / "d");
  WriteFile(Work(root) / "d" / "kept", "k\n");
  WriteFile(Work(root) / "d" / ".agentenv-tmp-999999-0", "half\n");
  WriteFile(Work(root) / ".agentenv-tmp-1-2", "half\n");
  WriteFile(Work(root) / ".agentenv-tmp-notours", "user file\n");  // not the pattern: a user's file
  REQUIRE(Agentenv(root, {"snap", "-q"}).code == 0);
  std::string listing = ExportListing(root, "HEAD", tmp.path());
  CHECK(listing.find("d/kept") != std::string::npos);
  CHECK(listing.find(".agentenv-tmp-notours") != std::string::npos);
  CHECK(listing.find(".agentenv-tmp-999999-0") == std::string::npos);
  CHECK(listing.find(".agentenv-tmp-1-2") == std::string::npos);
}

TEST_CASE("leftovers: a killed restore is named by status and its temp files never reach history", "[cli][slow]") {
  TempDir tmp;
  fs::path src = tmp.path() / "src", root = tmp.path() / "repo";
  MakeTree(src, 3000);
  REQUIRE(Agentenv(root, {"init", "-q", "--from", src.string()}).code == 0);
  std::string first = HeadId(root);
  int caught = 0;
  for (int round = 0; round < 12; ++round) {
    // Every round changes all files, then rolls back: a restore with work.
    for (int i = 0; i < 3000; i += 3)
      WriteFile(Work(root) / ("d" + std::to_string(i % 40)) / ("f" + std::to_string(i)), "changed " + std::to_string(round));
    REQUIRE(Agentenv(root, {"snap", "-q"}).code == 0);
    const std::string before = HeadId(root);
    bool killed = KillWhen(root, {"restore", first}, [&, round] {
      return fs::exists(root / "restoring") && ::usleep(1000 * (round % 4)) == 0;
    });
    if (!killed) continue;
    json st = AgentenvJson(root, {"status"});
    if (st["unfinished_restore"] == "") {
      // The kill came after the restore had moved HEAD and dropped its
      // marker (the check above and the kill are a few ms apart): done.
      // Or before the marker named its target (it is created, then
      // written): the restore had not begun and HEAD is where it was.
      const std::string head = HeadId(root);
      CHECK((head == first || head == before));
      CHECK(CountTemps(Work(root)) == 0);
      continue;
    }
    ++caught;
    CHECK(st["unfinished_restore"] == first);
    CHECK(CountTemps(Work(root)) == 0);  // the writer after the kill (status) removed them
    CmdResult snap = Agentenv(root, {"snap", "-q"});
    REQUIRE(snap.code == 0);
    CHECK(ExportListing(root, "HEAD", tmp.path()).find(".agentenv-tmp-") == std::string::npos);
    CHECK(AgentenvJson(root, {"status"})["unfinished_restore"] == "");
  }
  CHECK(caught > 0);
  REQUIRE(Agentenv(root, {"restore", first}).code == 0);
  CHECK(ManifestDiff(TreeManifest(src), TreeManifest(Work(root))).empty());
  CHECK(Agentenv(root, {"fsck"}).code == 0);
}

TEST_CASE("leftovers: a forward hardlink or one to a directory is bad input (exit 2) and records nothing", "[cli]") {
  TempDir tmp;
  fs::path root = tmp.path() / "repo";
  REQUIRE(Agentenv(root, {"init", "-q"}).code == 0);
  std::string head = HeadId(root);
  struct Case {
    std::vector<TarEntry> entries;
    std::string says;
  };
  std::vector<Case> cases = {
      {{{"early", '1', "late"}, {"late", '0', "", "data\n"}}, "hardlink 'early' -> 'late' names no entry before it"},
      {{{"d", '5'}, {"link", '1', "d"}}, "hardlink 'link' -> 'd' names a directory"},
  };
  int n = 0;
  for (const Case& c : cases) {
    fs::path tar = tmp.path() / ("bad" + std::to_string(n++) + ".tar");
    WriteTar(tar, c.entries);
    for (std::vector<std::string> cmd : {std::vector<std::string>{"import", tar.string()},
                                         {"init", "--tarball", tar.string()}}) {
      fs::path where = cmd[0] == "init" ? tmp.path() / ("fresh" + std::to_string(n)) : root;
      CmdResult r = Agentenv(where, cmd);
      INFO(r.Describe());
      CHECK(r.code == 2);
      CHECK(r.err.find(c.says) != std::string::npos);
      if (cmd[0] == "init") CHECK_FALSE(fs::exists(where / "meta"));
    }
  }
  CHECK(HeadId(root) == head);
  for (const auto& e : fs::directory_iterator(root / "work")) CHECK(e.path().filename() == "current");
}

}  // namespace
}  // namespace agentenv::test
