// Histories at scale: every command that walks history keeps a bounded
// peak RSS. The same commands run on a 20k-node and an 80k-node history
// (bench/history_gen bulk: a month of captures); if any of them held a row
// per node, its peak at 80k would be about 4x its peak at 20k. Each must
// stay within 1.3x + 20 MB.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "tests/testutil.h"

#ifndef AGENTENV_BIN
#error "AGENTENV_BIN must name the agentenv binary under test"
#endif
#ifndef HISTORY_GEN
#error "HISTORY_GEN must name bench/history_gen"
#endif

namespace agentenv::test {
namespace {

// Runs argv with AGENTENV_ROOT=root, output to /dev/null; returns its peak
// RSS in KB (fails the test unless it exits 0).
long PeakRssKb(const std::string& root, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("AGENTENV_ROOT", root.c_str(), 1);
    // Pages of the metadata and store index maps are unmapped past 8 MB
    // (store/map_trim.h): both histories pass that, so what is compared is
    // what else grows.
    ::setenv("AGENTENV_MAP_BUDGET_MB", "8", 1);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
  std::string line;
  for (const auto& a : args) line += a + " ";
  INFO(line);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return ru.ru_maxrss;
}

TEST_CASE("history scale: commands that walk history keep their peak RSS as history grows fourfold",
          "[slow][scale]") {
  ::setenv("TMPDIR", "/dev/shm", 1);  // 100k durable commits: fsync costs nothing on tmpfs
  TempDir t;
  ::unsetenv("TMPDIR");
  // The digest reads its span (linear in it by design): the same number
  // of nodes at both sizes, a day of the month at 20k, 6 hours at 80k.
  auto commands = [](long nodes) {
    return std::vector<std::vector<std::string>>{
        {"log", "-n", "20"},
        {"log", "--grep", "no title holds these words"},
        {"show", "@{3 days ago}"},
        {"log", "--digest", "--since", nodes == 20000 ? "24 hours ago" : "6 hours ago"},
        {"fsck", "--structure-only"},
        {"retain", "--dry-run"},
        {"retain"},
        {"gc"},
        {"fsck", "--structure-only"},
    };
  };
  std::map<long, std::vector<long>> peak;  // nodes -> peak RSS (KB) per command
  for (long nodes : {20000L, 80000L}) {
    const std::string root = t.str() + "/h" + std::to_string(nodes);
    REQUIRE(PeakRssKb(root, {HISTORY_GEN, "bulk", root, std::to_string(nodes)}) > 0);
    for (const auto& c : commands(nodes)) {
      std::vector<std::string> args = {AGENTENV_BIN};
      args.insert(args.end(), c.begin(), c.end());
      peak[nodes].push_back(PeakRssKb(root, args));
    }
  }
  const auto named = commands(80000);
  for (size_t i = 0; i < named.size(); ++i) {
    std::string name;
    for (const auto& a : named[i]) name += a + " ";
    const long small = peak[20000][i], big = peak[80000][i];
    INFO(name << ": " << small / 1024 << " MB at 20k nodes, " << big / 1024 << " MB at 80k");
    CHECK(double(big) <= 1.3 * double(small) + 20 * 1024 * kSanitizerMemory);
  }
}

TEST_CASE("history scale: the digest of a day of 6,000 captures names their directories from a sample it states",
          "[slow][scale]") {
  ::setenv("TMPDIR", "/dev/shm", 1);
  TempDir t;
  ::unsetenv("TMPDIR");
  const std::string root = t.str() + "/day";
  REQUIRE(PeakRssKb(root, {HISTORY_GEN, "bulk", root, "6000", "1"}) > 0);
  const std::string cmd = "AGENTENV_ROOT='" + root + "' '" AGENTENV_BIN "' log --digest --since '25 hours ago' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  for (size_t n; (n = ::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  INFO(out);
  // 6,000 captures: every third node object is read, and the page says so.
  CHECK(out.find("6,000 nodes") != std::string::npos);
  CHECK(out.find("dirs of captures from 1 in 3") != std::string::npos);
  CHECK(out.find("dirs: ") != std::string::npos);
}

}  // namespace
}  // namespace agentenv::test
