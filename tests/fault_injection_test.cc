// Faults below kill -9: power cuts that drop everything not yet fsynced, and
// writes or syncs that fail with ENOSPC or EIO, injected at every kind of
// call of snap, restore, retain, gc and import by the LD_PRELOAD layer in
// tests/fault/fault_fs.cc.
//
// Each scenario first runs its operation once, counting the calls that
// change a file or directory of the repository (M). Then, for crash points
// spread over 1..M, it starts from the same repository, cuts the power at
// that call, and checks what survived:
//  - every node committed before the operation is there, and fsck passes;
//  - HEAD's tree (as it was before) restores and equals what it was;
//  - the repository takes a new snapshot.
// For failed calls it checks that the operation failed cleanly: non-zero
// exit, the same nodes and HEAD as before, fsck passes, and the same
// operation then succeeds.
//
// AGENTENV_FAULT_POINTS (default 300) bounds the crash points per scenario,
// spread evenly over its calls (set it higher for a denser sweep: 600 cost
// the slow tier about a minute more); the scenarios below make over 1,000
// in all (each prints its count).

#include <algorithm>
#include <set>

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

#ifndef AGENTENV_FAULT_PRELOAD
#error "AGENTENV_FAULT_PRELOAD must name the fault-injection library (after a sanitizer runtime)"
#endif

namespace agentenv::test {
namespace {

// Runs /bin/cp -a (keeps hardlinks, owners, xattrs; std::filesystem does not).
void CopyTree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove_all(to, ec);
  CmdResult r = RunCmd({"/bin/cp", "-a", from.string(), to.string()});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
}

void MakeSource(const fs::path& src) {
  fs::create_directories(src / "etc/apt");
  fs::create_directories(src / "usr/lib/deep/er");
  fs::create_directories(src / "var/empty");
  for (int i = 0; i < 24; ++i) WriteFile(src / ("etc/conf" + std::to_string(i)), "setting=" + std::to_string(i) + "\n");
  WriteFile(src / "etc/apt/sources.list", "deb http://deb.example bookworm main\n");
  auto big = RandomBytes(700 * 1024, 7);  // several FastCDC chunks
  WriteFile(src / "usr/lib/big.so", std::string(big.begin(), big.end()));
  auto mid = RandomBytes(90 * 1024, 8);
  WriteFile(src / "usr/lib/deep/er/mid.bin", std::string(mid.begin(), mid.end()));
  fs::create_symlink("../usr/lib/big.so", src / "etc/big-link");
  fs::create_hard_link(src / "etc/conf0", src / "etc/conf0-hardlink");
}

// Changes in the live tree: a new chunked file, edits, a deletion, a
// directory rename.
void Mutate(const fs::path& work, int round) {
  std::string r = std::to_string(round);
  auto data = RandomBytes(300 * 1024, 100 + uint64_t(round));
  WriteFile(work / ("usr/lib/new" + r + ".so"), std::string(data.begin(), data.end()));
  WriteFile(work / "etc/conf3", "changed in round " + r + "\n");
  WriteFile(work / ("etc/added" + r), "round " + r + "\n");
  std::error_code ec;
  fs::remove(work / ("etc/conf" + std::to_string(10 + round)), ec);
  fs::create_directories(work / ("var/dir" + r + "/sub"));
  WriteFile(work / ("var/dir" + r + "/sub/f"), r);
  const fs::path prev = work / ("var/dir" + std::to_string(round - 1));
  if (fs::exists(prev)) fs::rename(prev, work / ("var/moved" + r));
}

std::set<std::string> NodeIds(const fs::path& repo) {
  CmdResult r = Agentenv(repo, {"log", "--json", "-n", "100000"});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  const json log = r.Json();
  std::set<std::string> ids;
  for (const auto& n : log["nodes"]) ids.insert(n["id"].get<std::string>());
  REQUIRE(!ids.empty());
  return ids;
}

struct Run {
  int code = 0;
  long calls = 0;       // tracked calls made
  std::string fault;    // the call that took the fault ("" when none did)
  std::string output;
};

struct Scenario {
  std::string name;
  bool saves_first = false;     // the operation first saves unsaved changes as a node
  std::vector<std::string> op;  // agentenv arguments, before --root
  fs::path base;                // the scenario's scratch space
  fs::path tmpl;                // the repository as the operation finds it
  std::set<std::string> before; // its nodes
  std::string head;             // its HEAD
  Manifest head_tree;           // HEAD's tree, restored
  std::set<std::string> after;  // the nodes after a run without faults
};

fs::path Repo(const Scenario& s) { return s.base / "repo"; }

Run RunWithFault(const Scenario& s, long at, const std::string& mode, bool ignore_sync = false) {
  fs::path stash = s.base / "stash", report = s.base / "report";
  std::error_code ec;
  fs::remove_all(stash, ec);
  fs::create_directories(stash);
  fs::remove(report, ec);
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "LD_PRELOAD=" AGENTENV_FAULT_PRELOAD,
                                   "AGENTENV_URING=off",
                                   "AGENTENV_FAULT_ROOT=" + Repo(s).string(),
                                   "AGENTENV_FAULT_STASH=" + stash.string(),
                                   "AGENTENV_FAULT_REPORT=" + report.string(),
                                   "AGENTENV_FAULT_AT=" + std::to_string(at),
                                   "AGENTENV_FAULT_MODE=" + mode};
  if (ignore_sync) argv.push_back("AGENTENV_FAULT_IGNORE_SYNC=1");
  argv.push_back(AGENTENV_BIN);
  argv.insert(argv.end(), s.op.begin(), s.op.end());
  argv.insert(argv.end(), {"--root", Repo(s).string()});
  CmdResult r = RunCmd(argv, "", 120000);
  Run run;
  run.code = r.code;
  run.output = r.Describe();
  std::string text = ReadFile(report);
  size_t p = text.find("calls=");
  if (p != std::string::npos) run.calls = std::atol(text.c_str() + p + 6);
  p = text.find("fault=");
  if (p != std::string::npos) run.fault = text.substr(p, text.find('\n', p) - p);
  fs::remove_all(stash, ec);
  return run;
}

// What every state after a fault must satisfy.
void CheckRepository(const Scenario& s, const std::set<std::string>& must_have) {
  const fs::path repo = Repo(s);
  CmdResult fsck = Agentenv(repo, {"fsck"});
  INFO("fsck: " << fsck.Describe());
  CHECK(fsck.code == 0);
  std::set<std::string> ids = NodeIds(repo);
  for (const auto& id : must_have) {
    INFO("node " << id << " committed before the fault");
    CHECK(ids.count(id) == 1);
  }
  CmdResult restore = Agentenv(repo, {"restore", s.head});
  INFO("restore: " << restore.Describe());
  REQUIRE(restore.code == 0);
  std::string diff = ManifestDiff(s.head_tree, TreeManifest(repo / "work/current"));
  INFO("the restored tree differs from HEAD's before the fault:\n" << diff);
  CHECK(diff.empty());
  WriteFile(repo / "work/current/after-fault", "x");
  CmdResult snap = Agentenv(repo, {"snap", "-m", "after the fault"});
  INFO("snap: " << snap.Describe());
  CHECK(snap.code == 0);
}

void Prepare(Scenario& s, const std::function<void(const fs::path& repo)>& setup) {
  const fs::path repo = s.base / "prep";
  fs::path src = s.base / "src";
  MakeSource(src);
  REQUIRE(Agentenv(repo, {"init", "--from", src.string(), "-q"}).code == 0);
  for (int round = 0; round < 4; ++round) {
    Mutate(repo / "work/current", round);
    REQUIRE(Agentenv(repo, {"snap", "-q", "-m", "round " + std::to_string(round)}).code == 0);
  }
  setup(repo);
  s.tmpl = s.base / "template";
  CopyTree(repo, s.tmpl);
  s.before = NodeIds(repo);
  s.head = HeadId(repo);
  // HEAD's tree as a restore makes it (from a copy: the template stays as it is).
  CopyTree(s.tmpl, Repo(s));
  REQUIRE(Agentenv(Repo(s), {"restore", s.head, "-q"}).code == 0);
  s.head_tree = TreeManifest(Repo(s) / "work/current");
  // A clean run of the operation: its nodes, and that it works at all.
  CopyTree(s.tmpl, Repo(s));
  CmdResult clean = Agentenv(Repo(s), s.op);
  INFO(clean.Describe());
  REQUIRE(clean.code == 0);
  s.after = NodeIds(Repo(s));
}

// Scenarios run on tmpfs: the power cuts are this layer's (it drops what
// was not synced), not the disk's, whose flushes only cost time (a third
// of a run on a VM's disk).
fs::path ScratchBase() { return fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp"; }

long Points() {
  const char* env = std::getenv("AGENTENV_FAULT_POINTS");
  return env ? std::max(1L, std::atol(env)) : 300;
}

// Up to `n` call numbers spread evenly over 1..m (all of them when m <= n).
std::vector<long> Spread(long m, long n) {
  std::vector<long> at;
  if (m <= n) {
    for (long i = 1; i <= m; ++i) at.push_back(i);
    return at;
  }
  for (long i = 0; i < n; ++i) at.push_back(1 + i * (m - 1) / (n - 1));
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

// `op`'s arguments may name files of the scenario as "@BASE@/...".
Scenario PrepareScenario(const fs::path& base, const std::string& name, std::vector<std::string> op,
                         const std::function<void(const fs::path& repo)>& setup) {
  Scenario s;
  s.name = name;
  s.base = base;
  for (auto& arg : op)
    if (arg.starts_with("@BASE@")) arg = s.base.string() + arg.substr(6);
  s.op = std::move(op);
  Prepare(s, setup);
  return s;
}

void RunScenario(const std::string& name, std::vector<std::string> op,
                 const std::function<void(const fs::path& repo)>& setup,
                 const std::function<std::set<std::string>(const Scenario&)>& survivors, bool saves_first = false) {
  TempDir tmp(ScratchBase());
  Scenario s = PrepareScenario(tmp.path(), name, std::move(op), setup);
  s.saves_first = saves_first;

  CopyTree(s.tmpl, Repo(s));
  Run count = RunWithFault(s, 0, "crash");
  INFO(count.output);
  REQUIRE(count.code == 0);
  REQUIRE(count.calls > 2);
  // Runs of the same operation make slightly different numbers of calls
  // (a restore here: 50 to 58 from run to run): cut only within what every
  // counting run made, so that the cuts land.
  for (int k = 0; k < 2; ++k) {
    CopyTree(s.tmpl, Repo(s));
    Run again = RunWithFault(s, 0, "crash");
    INFO(again.output);
    REQUIRE(again.code == 0);
    count.calls = std::min(count.calls, again.calls);
  }
  std::set<std::string> must = survivors(s);

  long crashes = 0;
  for (long at : Spread(count.calls, Points())) {
    CopyTree(s.tmpl, Repo(s));
    Run run = RunWithFault(s, at, "crash");
    INFO(name << ": power cut at call " << at << " of " << count.calls << " (" << run.fault << ")\n" << run.output);
    if (run.fault.empty()) continue;  // this run made fewer calls
    CHECK(run.code == 128 + SIGKILL);
    ++crashes;
    CheckRepository(s, must);
  }
  INFO(name << ": " << crashes << " power cuts of " << count.calls << " calls");
  WARN(name << ": " << crashes << " power cuts over " << count.calls << " calls");
  CHECK(crashes >= std::min<long>(Points(), count.calls) * 9 / 10);

  // Failed calls: ENOSPC from then on, or one EIO.
  for (const std::string mode : {"enospc", "eio"}) {
    for (long at : Spread(count.calls, 40)) {
      CopyTree(s.tmpl, Repo(s));
      Run run = RunWithFault(s, at, mode);
      INFO(name << ": " << mode << " at call " << at << " (" << run.fault << ")\n" << run.output);
      if (run.fault.empty()) continue;
      if (run.code == 0) {
        // Only a call whose failure loses nothing may be shrugged off:
        // the result must then be what a clean run gives (new nodes have
        // new times, so new ids: compare the old ones and the count).
        std::set<std::string> ids = NodeIds(Repo(s)), kept;
        for (const auto& id : s.after)
          if (s.before.count(id)) kept.insert(id);
        CHECK(std::includes(ids.begin(), ids.end(), kept.begin(), kept.end()));
        CHECK(ids.size() == s.after.size());
      } else if (mode == "enospc") {  // the message names a path, the full filesystem and the remedy
        CHECK(run.output.find("No space left on device") != std::string::npos);
        CHECK(run.output.find("the filesystem holding " + Repo(s).string() + " is full") != std::string::npos);
        CHECK(run.output.find(" fd ") == std::string::npos);
      }
      if (run.code == 0) {
      } else if (!s.saves_first) {
        CHECK(run.code != 128 + SIGKILL);
        CHECK(HeadId(Repo(s)) == s.head);
        CHECK(NodeIds(Repo(s)) == s.before);
      } else {  // the unsaved changes may have become a node, and HEAD with it
        CHECK(run.code != 128 + SIGKILL);
        std::set<std::string> ids = NodeIds(Repo(s));
        CHECK(std::includes(ids.begin(), ids.end(), s.before.begin(), s.before.end()));
        CHECK(ids.size() <= s.before.size() + 1);
        std::string head = HeadId(Repo(s));
        CHECK((head == s.head || s.before.count(head) == 0));
      }
      CheckRepository(s, s.before == s.after ? s.before : must);
    }
  }
}

std::set<std::string> Before(const Scenario& s) { return s.before; }

// The test of the tests: the same power cuts in a program whose fsyncs do
// nothing must lose data somewhere, or the layer models nothing.
TEST_CASE("fault injection: the power-cut layer catches a program that never fsyncs", "[fault][slow]") {
  TempDir tmp(ScratchBase());
  Scenario s = PrepareScenario(tmp.path(), "snap", {"snap", "-m", "under fault"},
                               [](const fs::path& repo) { Mutate(repo / "work/current", 9); });
  CopyTree(s.tmpl, Repo(s));
  Run count = RunWithFault(s, 0, "crash", true);
  REQUIRE(count.calls > 2);
  long broken = 0;
  for (long at = 1; at <= count.calls; ++at) {
    CopyTree(s.tmpl, Repo(s));
    Run run = RunWithFault(s, at, "crash", true);
    if (run.fault.empty()) continue;
    CmdResult fsck = Agentenv(Repo(s), {"fsck"});
    CmdResult log = Agentenv(Repo(s), {"log", "-n", "100000"});
    bool lost = false;
    for (const auto& id : s.before) lost = lost || log.out.find(id.substr(0, 12)) == std::string::npos;
    if (fsck.code != 0 || log.code != 0 || lost) ++broken;
  }
  INFO(broken << " of " << count.calls << " power cuts broke the repository of a program without fsync");
  WARN(broken << " of " << count.calls << " power cuts broke the repository of a program without fsync");
  CHECK(broken > 0);
}

TEST_CASE("fault injection: power cuts and failed writes during snap lose no committed node", "[fault][slow]") {
  RunScenario("snap", {"snap", "-m", "under fault"},
              [](const fs::path& repo) { Mutate(repo / "work/current", 9); }, Before);
}

TEST_CASE("fault injection: power cuts and failed writes during restore lose no committed node", "[fault][slow]") {
  RunScenario("restore", {"restore", "HEAD~3"},
              [](const fs::path& repo) { WriteFile(repo / "work/current/etc/unsaved", "unsaved change\n"); },
              Before, true);
}

TEST_CASE("fault injection: power cuts and failed writes during a large snap lose no committed node", "[fault][slow]") {
  RunScenario("large snap", {"snap", "-m", "many files"},
              [](const fs::path& repo) {
                for (int i = 0; i < 60; ++i) {
                  const fs::path d = repo / "work/current/srv" / ("d" + std::to_string(i % 7));
                  fs::create_directories(d);
                  WriteFile(d / ("f" + std::to_string(i)), std::string(size_t(100 + 37 * i), char('a' + i % 26)));
                }
                Mutate(repo / "work/current", 9);
              },
              Before);
}

TEST_CASE("fault injection: power cuts and failed writes during a restore to the root lose no committed node",
          "[fault][slow]") {
  RunScenario("restore to root", {"restore", "HEAD~4"}, [](const fs::path&) {}, Before);
}

TEST_CASE("fault injection: power cuts and failed writes during retain lose no node it keeps", "[fault][slow]") {
  RunScenario("retain", {"retain", "--keep-last", "1", "--keep-within", "0"}, [](const fs::path&) {},
              [](const Scenario& s) {
                std::set<std::string> kept;  // a cut may leave the dropped ones, never lose a kept one
                for (const auto& id : s.after) kept.insert(id);
                INFO("kept " << kept.size() << " of " << s.before.size());
                REQUIRE(kept.size() < s.before.size());
                return kept;
              });
}

TEST_CASE("fault injection: power cuts and failed writes during gc lose no node", "[fault][slow]") {
  RunScenario("gc", {"gc", "--compact-above", "0"},
              [](const fs::path& repo) {
                REQUIRE(Agentenv(repo, {"retain", "--keep-last", "1", "--keep-within", "0", "-q"}).code == 0);
              },
              Before);
}

TEST_CASE("fault injection: power cuts and failed writes during gc --full lose no node", "[fault][slow]") {
  RunScenario("gc --full", {"gc", "--full", "--compact-above", "0"},
              [](const fs::path& repo) {
                REQUIRE(Agentenv(repo, {"retain", "--keep-last", "1", "--keep-within", "0", "-q"}).code == 0);
              },
              Before);
}

TEST_CASE("fault injection: power cuts and failed writes during import lose no committed node", "[fault][slow]") {
  RunScenario("import", {"import", "@BASE@/import.tar"},
              [](const fs::path& repo) {
                const fs::path base = repo.parent_path(), tree = base / "import-tree";
                MakeSource(tree);
                Mutate(tree, 0);
                Mutate(tree, 1);
                WriteFile(tree / "only-in-the-archive", "imported\n");
                CmdResult tar = RunCmd({"/bin/tar", "-C", tree.string(), "-cf", (base / "import.tar").string(), "."});
                INFO(tar.Describe());
                REQUIRE(tar.code == 0);
              },
              Before);
}

}  // namespace
}  // namespace agentenv::test
