// Hostile input to `import`, each refused at once with exit 2, a message
// that names the archive and the fault, and nothing recorded: a sparse
// entry claiming a huge file, malformed pax records, a hardlink whose
// target only a pax record names, an image blob that is a symlink.
#include <sys/stat.h>

#include <chrono>

#include <catch2/catch.hpp>

#include "tests/cli_testutil.h"
#include "tests/oci_testutil.h"
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

TEST_CASE("import: a 512-byte sparse entry claiming 1 TiB is refused at once, nothing recorded", "[cli][import]") {
  TempDir tmp;
  Untouched repo(tmp);
  // GNU sparse 1.0 in pax: the map (one empty data region) is the entry's
  // first block, the size its real size.
  std::string records = PaxRecord("GNU.sparse.major", "1") + PaxRecord("GNU.sparse.minor", "0") +
                        PaxRecord("GNU.sparse.name", "big") + PaxRecord("GNU.sparse.realsize", "1099511627776");
  std::string map = "1\n0\n0\n";
  map.resize(512, '\0');
  WriteTar(tmp / "sparse.tar", {{"PaxHeader/big", 'x', "", records}, {"GNUSparseFile.0/big", '0', "", map}});
  // Before the holes were bounded this hashed a 1 TiB file for tens of
  // minutes: 20 s is far more than a refusal takes.
  repo.ExpectRefused({"import", (tmp / "sparse.tar").string()}, "'big' is a sparse file of 1099511627776 bytes", 20000);
  // The bound is on all the holes of an archive: two entries of 600 MiB
  // of holes each are refused too, one alone is recorded.
  std::vector<TarEntry> two;
  for (const char* name : {"a", "b"}) {
    std::string r = PaxRecord("GNU.sparse.major", "1") + PaxRecord("GNU.sparse.minor", "0") +
                    PaxRecord("GNU.sparse.name", name) + PaxRecord("GNU.sparse.realsize", std::to_string(600 << 20));
    two.push_back({std::string("PaxHeader/") + name, 'x', "", r});
    two.push_back({std::string("GNUSparseFile.0/") + name, '0', "", map});
  }
  WriteTar(tmp / "two.tar", two);
  repo.ExpectRefused({"import", (tmp / "two.tar").string()}, "at most 1 GiB of holes in all");
  two.resize(2);
  WriteTar(tmp / "one.tar", two);
  CmdResult one = Agentenv(repo.root(), {"import", (tmp / "one.tar").string()});
  INFO(one.Describe());
  CHECK(one.code == 0);
}

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
  // The leading '/' goes, as tar tools remove it: etc/shadow is no entry.
  for (const char* name : {"pax.tar", "ustar.tar"})
    repo.ExpectRefused({"import", (tmp / name).string()}, "hardlink 'h' -> 'etc/shadow' names no entry before it");
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

TEST_CASE("import --oci: a blob that is a symlink or not a regular file is never opened through, nothing recorded",
          "[cli][import][oci]") {
  TempDir tmp;
  Untouched repo(tmp);
  WriteTar(tmp / "layer.tar", {{"f", '0', "", "fine\n"}});
  // The blob's content is the layer's: followed, it would verify.
  std::vector<json> layers = MakeLayout(tmp / "image", {tmp / "layer.tar"});
  fs::path blob = tmp / "image/blobs/sha256" / layers[0]["digest"].get<std::string>().substr(7);
  fs::copy_file(blob, tmp / "outside-blob");
  fs::remove(blob);
  fs::create_symlink(tmp / "outside-blob", blob);
  repo.ExpectRefused({"import", "--oci", (tmp / "image").string()}, blob.string() + ": a symbolic link");
  // Nor a directory of the layout that links out of it.
  fs::remove(blob);
  fs::rename(tmp / "outside-blob", blob);
  fs::rename(tmp / "image/blobs", tmp / "blobs-elsewhere");
  fs::create_symlink(tmp / "blobs-elsewhere", tmp / "image/blobs");
  repo.ExpectRefused({"import", "--oci", (tmp / "image").string()}, (tmp / "image/blobs").string() + ": a symbolic link");
  // A FIFO would block the open until a writer came.
  fs::remove(tmp / "image/blobs");
  fs::rename(tmp / "blobs-elsewhere", tmp / "image/blobs");
  fs::remove(blob);
  REQUIRE(::mkfifo(blob.c_str(), 0644) == 0);
  repo.ExpectRefused({"import", "--oci", (tmp / "image").string()}, blob.string() + ": not a regular file", 20000);
}

}  // namespace agentenv::test
