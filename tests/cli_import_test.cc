// Hostile input to `import`, each refused at once with exit 2, a message
// that names the archive and the fault, and nothing recorded: malformed
// pax records, a hardlink whose target only a pax record names.
#include <sys/stat.h>

#include <chrono>

#include <catch2/catch.hpp>

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

// A pax record: "<length> key=value\n", the length counting itself.
std::string PaxRecord(const std::string& key, const std::string& value) {
  size_t n = key.size() + value.size() + 3;
  size_t digits = 1;
  while (std::to_string(n + digits).size() != digits) ++digits;
  return std::to_string(n + digits) + " " + key + "=" + value + "\n";
}

// A repository whose state must not change, and the check that it did not.
class Untouched {
 public:
  explicit Untouched(const TempDir& tmp) : root_(tmp / "repo") {
    fs::create_directories(tmp / "src");
    WriteFile(tmp / "src/f", "f\n");
    CmdResult init = Agentenv(root_, {"init", "--from", (tmp / "src").string()});
    INFO(init.Describe());
    REQUIRE(init.code == 0);
    head_ = HeadId(root_);
    packs_ = Packs();
  }
  const fs::path& root() const { return root_; }

  // `args` run as an import: exit 2, the error names `says`, nothing
  // recorded. Returns the run.
  CmdResult ExpectRefused(const std::vector<std::string>& args, const std::string& says, int timeout_ms = 60000) const {
    auto start = std::chrono::steady_clock::now();
    CmdResult r = Agentenv(root_, args, timeout_ms);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(args.back() << ": " << r.Describe() << " (" << seconds << " s)");
    CHECK(r.code == 2);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(r.err.find("refusing") != std::string::npos);
    CHECK(HeadId(root_) == head_);
    CHECK(AgentenvJson(root_, {"log"})["nodes"].size() == 1);
    CHECK(Packs() == packs_);
    for (const auto& e : fs::directory_iterator(root_ / "work")) CHECK(e.path().filename() == "current");
    return r;
  }

 private:
  std::map<std::string, uintmax_t> Packs() const {
    std::map<std::string, uintmax_t> m;
    for (const auto& e : fs::directory_iterator(root_ / "store/packs")) m[e.path().filename()] = e.file_size();
    return m;
  }

  fs::path root_;
  std::string head_;
  std::map<std::string, uintmax_t> packs_;
};

}  // namespace

TEST_CASE("import: malformed pax length records are refused as GNU tar refuses them, nothing recorded",
          "[cli][import]") {
  TempDir tmp;
  Untouched repo(tmp);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"999999 path=zz\n", "past the header's end"},
      {"0 path=zz\n", "too short for a record"},
      {"-5 path=zz\n", "does not start with its length"},
      {"abc path=zz\n", "does not start with its length"},
      {"12 path=zz\n", "past the header's end"},  // one more than it is
      {"10 path=zz\n", "no newline there"},       // one less than it is
      {"11 uid=abc\n", "not a decimal number"},
  };
  for (const auto& [records, says] : cases) {
    INFO(records);
    WriteTar(tmp / "bad.tar", {{"PaxHeader/f", 'x', "", records}, {"f", '0', "", "hi\n"}});
    // GNU tar, the reference, refuses each of them too.
    CmdResult gnu = RunCmd({"/usr/bin/tar", "-tf", (tmp / "bad.tar").string()});
    CHECK(gnu.code == 2);
    std::string record = "record '" + records.substr(0, records.size() - 1) + "\\n'";
    CmdResult r = repo.ExpectRefused({"import", (tmp / "bad.tar").string()}, "bad.tar: pax header at byte 0: " + record);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

TEST_CASE("import: a hardlink leaving the tree is refused whether ustar or a pax linkpath names its target",
          "[cli][import]") {
  TempDir tmp;
  Untouched repo(tmp);
  // libarchive used to read the first of these as an empty regular file.
  WriteTar(tmp / "pax.tar", {{"PaxHeader/h", 'x', "", PaxRecord("linkpath", "/etc/shadow")}, {"h", '1'}});
  WriteTar(tmp / "ustar.tar", {{"h", '1', "/etc/shadow"}});
  WriteTar(tmp / "pax-dotdot.tar", {{"PaxHeader/h", 'x', "", PaxRecord("linkpath", "../../etc/shadow")}, {"h", '1'}});
  for (const char* name : {"pax.tar", "ustar.tar"})
    repo.ExpectRefused({"import", (tmp / name).string()}, "hardlink 'h' -> '/etc/shadow' points outside the archive");
  repo.ExpectRefused({"import", (tmp / "pax-dotdot.tar").string()}, "hardlink 'h' -> '../../etc/shadow' points outside");
  // A link with no target at all is no link.
  WriteTar(tmp / "none.tar", {{"h", '1'}});
  repo.ExpectRefused({"import", (tmp / "none.tar").string()}, "entry 'h' (header at byte 0) is a hardlink with no target");
  // Within the tree, a pax linkpath makes the link it names.
  WriteTar(tmp / "fine.tar", {{"a", '0', "", "a\n"}, {"PaxHeader/h", 'x', "", PaxRecord("linkpath", "a")}, {"h", '1'}});
  CmdResult r = Agentenv(repo.root(), {"import", (tmp / "fine.tar").string(), "--json"});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  std::string node = r.Json().value("node", "");
  CmdResult ls = Agentenv(repo.root(), {"ls", node, "--json"});
  INFO(ls.Describe());
  CHECK(ls.out.find("\"h\"") != std::string::npos);
  CHECK(ls.Json().dump().find("hardlink") != std::string::npos);
}

}  // namespace agentenv::test
