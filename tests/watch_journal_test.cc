// watch/journal: real files, real inotify.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/testutil.h"
#include "watch/debounce.h"
#include "watch/journal.h"

namespace fs = std::filesystem;
using namespace agentenv::watch;
using namespace std::chrono_literals;
using agentenv::test::TempDir;
using agentenv::test::WaitFor;

namespace {

void WriteFile(const fs::path& p, const std::string& data = "x") {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, data.data(), data.size()) == ssize_t(data.size()));
  ::close(fd);
}

Journal OpenJournal(const fs::path& root, JournalOptions opts = {}) {
  auto j = Journal::Open(root.string(), std::move(opts));
  REQUIRE(j);
  return std::move(j).value();
}

// Reads until pred holds (true) or 3 s pass (false).
bool ReadUntil(Journal& j, ChangeSet& cs, const std::function<bool(const ChangeSet&)>& pred) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!pred(cs)) {
    if (std::chrono::steady_clock::now() > end) return false;
    struct pollfd pfd = {j.fd(), POLLIN, 0};
    ::poll(&pfd, 1, 50);
    REQUIRE(j.Read(cs));
  }
  return true;
}

// Reads until nothing arrives for 150 ms.
ChangeSet Settle(Journal& j) {
  ChangeSet cs;
  struct pollfd pfd = {j.fd(), POLLIN, 0};
  while (::poll(&pfd, 1, 150) > 0) REQUIRE(j.Read(cs));
  return cs;
}

bool Has(const ChangeSet& cs, const std::string& path, Scope scope) {
  auto it = cs.paths.find(path);
  return it != cs.paths.end() && it->second == scope;
}

}  // namespace

TEST_CASE("journal: file create, modify, attrib, rename, delete are reported") {
  TempDir t;
  fs::create_directories(t / "d");
  Journal j = OpenJournal(t.path());
  CHECK(j.watch_count() == 2);

  ChangeSet cs;
  WriteFile(t / "d/f");
  CHECK(ReadUntil(j, cs, [](auto& c) { return Has(c, "d/f", Scope::kEntry); }));
  Settle(j);

  cs = {};
  WriteFile(t / "d/f", "more");
  CHECK(ReadUntil(j, cs, [](auto& c) { return c.paths.count("d/f"); }));
  Settle(j);

  cs = {};
  fs::permissions(t / "d/f", fs::perms::owner_read);
  CHECK(ReadUntil(j, cs, [](auto& c) { return c.paths.count("d/f"); }));

  cs = {};
  fs::rename(t / "d/f", t / "g");
  CHECK(ReadUntil(j, cs, [](auto& c) { return c.paths.count("d/f") && c.paths.count("g"); }));

  cs = {};
  fs::remove(t / "g");
  CHECK(ReadUntil(j, cs, [](auto& c) { return Has(c, "g", Scope::kEntry); }));
  CHECK(cs.paths.size() == 1);
  CHECK_FALSE(cs.rescan_all);
}

TEST_CASE("journal: directory trees created in a burst are fully watched") {
  TempDir t;
  Journal j = OpenJournal(t.path());
  // Files land before the journal can add watches: the scan must find them.
  // Reading runs concurrently with the writer and also after it is done.
  std::thread writer([&] {
    for (int i = 0; i < 30; ++i) {
      fs::path leaf = t / ("t" + std::to_string(i)) / "b" / "c";
      fs::create_directories(leaf);
      std::ofstream(leaf / "f") << "x";  // no REQUIRE off the test thread
    }
  });
  ChangeSet cs;
  bool all = ReadUntil(j, cs, [](auto& c) { return c.Covers("t29/b/c/f"); });
  writer.join();
  CHECK(all);
  cs.Merge(Settle(j));
  for (int i = 0; i < 30; ++i) {
    std::string top = "t" + std::to_string(i);
    CHECK(cs.Covers(top + "/b/c/f"));
  }
  CHECK(j.watch_count() == 1 + 30 * 3);

  // Every new directory carries a watch: a later write names its file.
  cs = {};
  for (int i = 0; i < 30; ++i) WriteFile(t / ("t" + std::to_string(i)) / "b/c/f", "y");
  CHECK(ReadUntil(j, cs, [](auto& c) {
    for (int i = 0; i < 30; ++i)
      if (!Has(c, "t" + std::to_string(i) + "/b/c/f", Scope::kEntry)) return false;
    return true;
  }));
}

TEST_CASE("journal: a renamed directory is a new subtree, later events use the new name") {
  TempDir t;
  fs::create_directories(t / "old/sub/deeper");
  Journal j = OpenJournal(t.path());
  fs::rename(t / "old", t / "new");
  ChangeSet cs;
  CHECK(ReadUntil(j, cs, [](auto& c) {
    return Has(c, "old", Scope::kEntry) && Has(c, "new", Scope::kSubtree);
  }));
  CHECK(j.watch_count() == 4);

  cs = {};
  WriteFile(t / "new/sub/deeper/f");
  CHECK(ReadUntil(j, cs, [](auto& c) { return c.paths.count("new/sub/deeper/f"); }));
  CHECK_FALSE(cs.Covers("old/sub/deeper/f"));

  // Renamed below another watched directory, then renamed again.
  fs::create_directories(t / "other");
  fs::rename(t / "new/sub", t / "other/moved");
  fs::rename(t / "other", t / "other2");
  Settle(j);
  cs = {};
  WriteFile(t / "other2/moved/deeper/g");
  CHECK(ReadUntil(j, cs, [](auto& c) { return c.paths.count("other2/moved/deeper/g"); }));
}

TEST_CASE("journal: moves out of the tree drop watches, moves in add them") {
  TempDir t, outside;
  fs::create_directories(t / "m/n");
  Journal j = OpenJournal(t.path());
  REQUIRE(j.watch_count() == 3);

  fs::rename(t / "m", outside / "m");
  ChangeSet cs;
  CHECK(ReadUntil(j, cs, [](auto& c) { return Has(c, "m", Scope::kEntry); }));
  Settle(j);
  CHECK(j.watch_count() == 1);
  WriteFile(outside / "m/n/f");  // no longer ours
  CHECK(Settle(j).empty());

  fs::rename(outside / "m", t / "back");
  cs = {};
  CHECK(ReadUntil(j, cs, [](auto& c) { return Has(c, "back", Scope::kSubtree); }));
  CHECK(j.watch_count() == 3);
  cs = {};
  WriteFile(t / "back/n/g");
  CHECK(ReadUntil(j, cs, [](auto& c) { return Has(c, "back/n/g", Scope::kEntry); }));

  // Deleting a watched directory releases its watch.
  fs::remove_all(t / "back");
  Settle(j);
  CHECK(j.watch_count() == 1);
}

TEST_CASE("journal: ignored directories get no watch and produce no events") {
  TempDir t;
  fs::create_directories(t / "tmp/a");
  fs::create_directories(t / "src");
  fs::create_directories(t / "build");
  JournalOptions opts;
  auto extra = IgnoreRules::Parse("build/\n");
  REQUIRE(extra);
  opts.ignore.Add(*extra);
  Journal j = OpenJournal(t.path(), opts);
  CHECK(j.watch_count() == 2);  // root and src

  WriteFile(t / "tmp/a/f");
  WriteFile(t / "build/out.o");
  WriteFile(t / "src/.main.c.swp");
  fs::create_directories(t / "src/x/tmp");  // "tmp" is anchored: src/x/tmp is kept
  WriteFile(t / "src/main.c");
  ChangeSet cs;
  CHECK(ReadUntil(j, cs, [](auto& c) { return c.paths.count("src/main.c"); }));
  cs.Merge(Settle(j));
  CHECK(cs.paths.count("src/x"));
  CHECK_FALSE(cs.Covers("tmp/a/f"));
  CHECK_FALSE(cs.Covers("build/out.o"));
  CHECK_FALSE(cs.Covers("src/.main.c.swp"));
  CHECK(j.watch_count() == 4);

  // A watched directory renamed to an ignored name leaves the journal.
  fs::rename(t / "src/x", t / "build2");
  fs::rename(t / "build2", t / "tmp/x");
  Settle(j);
  CHECK(j.watch_count() == 2);
}

TEST_CASE("journal: queue overflow reports rescan_all and re-walks the tree") {
  long max_events = 0;
  std::ifstream("/proc/sys/fs/inotify/max_queued_events") >> max_events;
  if (max_events <= 0 || max_events > 200000)
    agentenv::test::Skip("fs.inotify.max_queued_events is " + std::to_string(max_events) + ", too large to overflow");
  TempDir t;
  fs::create_directories(t / "d");
  Journal j = OpenJournal(t.path());
  // create + modify + close_write per file, nothing read meanwhile.
  for (long i = 0; i < max_events / 3 + 100; ++i) WriteFile(t / "d" / std::to_string(i));
  // Created after the queue is full: its event is lost, only the re-walk can find it.
  fs::create_directories(t / "lost/sub");
  ChangeSet cs;
  REQUIRE(j.Read(cs));
  CHECK(cs.rescan_all);
  CHECK(j.watch_count() == 4);
  Settle(j);
  cs = {};
  WriteFile(t / "lost/sub/f");
  CHECK(ReadUntil(j, cs, [](auto& c) { return Has(c, "lost/sub/f", Scope::kEntry); }));
}

TEST_CASE("journal: hitting the watch limit degrades with one warning and keeps working") {
  TempDir t;
  for (int i = 0; i < 8; ++i) fs::create_directories(t / ("d" + std::to_string(i)));
  // A user namespace has its own inotify watch limit (user.max_inotify_watches),
  // so the test lowers only its own, never the host's.
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWUSER) != 0) _exit(77);
    {
      std::ofstream limit("/proc/sys/user/max_inotify_watches");
      limit << 4 << std::flush;
      if (!limit) _exit(78);
    }
    std::vector<std::string> warnings;
    JournalOptions opts;
    opts.on_warning = [&](const std::string& w) { warnings.push_back(w); };
    auto j = Journal::Open(t.str(), opts);
    if (!j) _exit(10);
    if (!j->degraded() || j->watch_count() != 4) _exit(11);
    ::mkdir((t / "more").c_str(), 0755);
    ::mkdir((t / "more2").c_str(), 0755);
    ChangeSet cs;
    ::close(::open((t / "f").c_str(), O_WRONLY | O_CREAT, 0644));
    WaitFor([&] {
      if (!j->Read(cs)) _exit(12);
      return cs.paths.count("more2") && cs.paths.count("f");
    }, 2000);
    if (!cs.paths.count("more2") || !cs.paths.count("f")) _exit(13);
    if (warnings.size() != 1 || warnings[0].find("limit") == std::string::npos) _exit(14);

    // The Watcher turns degraded mode into periodic rescan_all deliveries.
    WatcherOptions wopts;
    wopts.timing = {20ms, 100ms};
    wopts.degraded_rescan = 100ms;
    std::atomic<int> rescans{0};
    auto w = Watcher::Start(t.str(), wopts, [&](ChangeSet c) { rescans += c.rescan_all; });
    if (!w || !(*w)->degraded()) _exit(15);
    WaitFor([&] { return rescans >= 2; }, 2000);
    w->reset();
    if (rescans < 2) _exit(16);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 78)
    agentenv::test::Skip("cannot create a user namespace with its own inotify limit here");
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("journal: non-UTF-8 names and paths longer than PATH_MAX") {
  TempDir t;
  Journal j = OpenJournal(t.path());
  std::string odd = "bad\xff\xfe";
  WriteFile(t / odd);
  ChangeSet cs;
  CHECK(ReadUntil(j, cs, [&](auto& c) { return c.paths.count(odd); }));

  // 40 levels of 200-byte names: 8 KB, twice PATH_MAX. Built with *at calls.
  std::string name(200, 'n');
  std::vector<int> fds = {::open(t.path().c_str(), O_RDONLY | O_DIRECTORY)};
  std::string rel;
  for (int i = 0; i < 40; ++i) {
    REQUIRE(::mkdirat(fds.back(), name.c_str(), 0755) == 0);
    fds.push_back(::openat(fds.back(), name.c_str(), O_RDONLY | O_DIRECTORY));
    rel += (rel.empty() ? "" : "/") + name;
  }
  Settle(j);
  cs = {};
  ::close(::openat(fds.back(), "leaf", O_WRONLY | O_CREAT, 0644));
  CHECK(ReadUntil(j, cs, [&](auto& c) { return c.paths.count(rel + "/leaf"); }));
  CHECK(j.watch_count() == 41);

  // std::filesystem cannot remove this (ENAMETOOLONG): unwind with *at calls.
  ::unlinkat(fds.back(), "leaf", 0);
  for (size_t i = fds.size() - 1; i-- > 0;) {
    ::close(fds[i + 1]);
    CHECK(::unlinkat(fds[i], name.c_str(), AT_REMOVEDIR) == 0);
  }
  ::close(fds[0]);
}
