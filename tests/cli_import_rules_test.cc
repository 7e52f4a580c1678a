// An import means the same thing wherever and whenever it runs: a
// directory the archive leaves implicit takes its metadata from the
// archive, owners are the archive's numbers, what the ignore rules leave
// out is named; and what tar tools accept with a warning (a leading '/',
// a name given twice) is accepted the same way, while what leaves the
// tree stays refused.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "tests/cli_exec_testutil.h"
#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

constexpr const char* kTar = "/usr/bin/tar";

std::string PaxRecord(const std::string& key, const std::string& value) {
  size_t n = key.size() + value.size() + 3;
  size_t digits = 1;
  while (std::to_string(n + digits).size() != digits) ++digits;
  return std::to_string(n + digits) + " " + key + "=" + value + "\n";
}

CmdResult Must(const fs::path& root, const std::vector<std::string>& args) {
  CmdResult r = Agentenv(root, args);
  INFO("agentenv " << args[0] << ": " << r.Describe());
  REQUIRE(r.code == 0);
  return r;
}

// The node `archive` imports as, restored into the live tree.
std::string ImportAndRestore(const fs::path& root, const fs::path& archive) {
  std::string node = Must(root, {"import", archive.string(), "--json"}).Json().value("node", "");
  Must(root, {"restore", node});
  return node;
}

void SetMtime(const fs::path& p, time_t sec) {
  struct timespec ts[2] = {{0, UTIME_OMIT}, {sec, 0}};
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}

struct stat Stat(const fs::path& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st;
}

}  // namespace

TEST_CASE("import rules: the same archive gives the same node, its implied directories' metadata from the archive",
          "[cli][import]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src / "d1/sub");
  WriteFile(src / "d1/f1", "1\n");
  WriteFile(src / "d1/sub/f2", "2\n");
  SetMtime(src / "d1/f1", 1500000000);
  SetMtime(src / "d1/sub/f2", 1600000000);
  // Files only: d1 and d1/sub have no entry (as test_compat_gzip_1.tgz's d1).
  fs::path archive = tmp / "files.tar";
  CmdResult t = RunCmd({kTar, "--format=pax", "-C", src.string(), "-cf", archive.string(), "d1/f1", "d1/sub/f2"});
  REQUIRE(t.code == 0);
  fs::path root = tmp / "repo";
  Must(root, {"init"});
  ::umask(077);  // the unpacking user's umask must not reach the node
  std::string first = ImportAndRestore(root, archive);
  ::umask(022);
  // 0755, the root's owner (the importing user: the archive has no root
  // entry) and the newest mtime of the entries below.
  for (const auto& [dir, mtime] : {std::pair{"d1", 1600000000}, std::pair{"d1/sub", 1600000000}}) {
    INFO(dir);
    struct stat st = Stat(Work(root) / dir);
    CHECK((st.st_mode & 07777) == 0755);
    CHECK(st.st_uid == ::geteuid());
    CHECK(st.st_mtim.tv_sec == mtime);
    CHECK(st.st_mtim.tv_nsec == 0);
  }
  // Later, the same bytes give the same node: their exports are equal.
  ::usleep(20000);
  std::string second = Must(root, {"import", archive.string(), "--json"}).Json().value("node", "");
  fs::path a = tmp / "a.tar", b = tmp / "b.tar";
  Must(root, {"export", first, "-o", a.string()});
  Must(root, {"export", second, "-o", b.string()});
  CHECK(ReadFile(a) == ReadFile(b));
  json one = Must(root, {"show", first, "--json"}).Json(), two = Must(root, {"show", second, "--json"}).Json();
  CHECK(one["node"].value("tree", "x") == two["node"].value("tree", "y"));
}

TEST_CASE("import rules: owners are the archive's numbers, not this host's names for them", "[cli][import]") {
  if (!IsRoot()) Skip("needs root: only root gives files other owners");
  TempDir tmp;
  // uid 32757 is nobody's here, gid 20 the group "dialout" (the archive's
  // names say "nobody" and "staff": 65534 and 50 on this host). An ACL
  // entry with star's numeric field keeps its number; one without uses
  // this host's name, the only id there is.
  std::string acl = "user::rw-,user:lp:rw-:4242,group::r--,group:daemon:r--,mask::rw-,other::r--";
  std::string records = PaxRecord("uid", "32757") + PaxRecord("gid", "20") + PaxRecord("uname", "nobody") +
                        PaxRecord("gname", "staff") + PaxRecord("SCHILY.acl.access", acl);
  WriteTar(tmp / "owners.tar", {{"PaxHeader/f", 'x', "", records}, {"f", '0', "", "owned\n"}});
  fs::path root = tmp / "repo";
  Must(root, {"init"});
  ImportAndRestore(root, tmp / "owners.tar");
  struct stat st = Stat(Work(root) / "f");
  CHECK(st.st_uid == 32757);
  CHECK(st.st_gid == 20);
  CmdResult facl = RunCmd({"/usr/bin/getfacl", "-n", "-c", (Work(root) / "f").string()});
  REQUIRE(facl.code == 0);
  CHECK(facl.out.find("user:4242:rw-") != std::string::npos);
  CHECK(facl.out.find("group:1:r--") != std::string::npos);  // daemon, by this host's group file
  CHECK(facl.out.find("user:7:") == std::string::npos);       // lp here
}

TEST_CASE("import rules: files under ignored paths are named in a warning, on stderr and in --json", "[cli][import]") {
  TempDir tmp;
  std::vector<TarEntry> entries = {{"keep/g", '0', "", "kept\n"}};
  for (const char* p : {"tmp/f.txt", "run/b", "var/tmp/c", "var/cache/apt/d", "proc/e", "dev/f"})
    entries.push_back({p, '0', "", "gone\n"});
  WriteTar(tmp / "ignored.tar", entries);
  fs::path root = tmp / "repo";
  Must(root, {"init"});
  CmdResult text = Must(root, {"import", (tmp / "ignored.tar").string()});
  const std::string says =
      "6 entries under ignored paths left out of the node (tmp/f.txt, run/b, var/tmp/c, ...)";
  CHECK(text.err.find("warning: " + says) != std::string::npos);
  CHECK(text.out.find("warning") == std::string::npos);
  json j = Must(root, {"import", (tmp / "ignored.tar").string(), "--json"}).Json();
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0].get<std::string>().rfind(says, 0) == 0);
  // And the node holds the rest, the ignored directories kept empty.
  std::string node = j.value("node", "");
  CHECK(Must(root, {"cat", node, "keep/g"}).out == "kept\n");
  CHECK(Agentenv(root, {"cat", node, "tmp/f.txt"}).code != 0);
}

TEST_CASE("import rules: a leading '/' is removed and the last of a name given twice wins, with warnings, "
          "'..' and links out stay refused",
          "[cli][import]") {
  TempDir tmp;
  fs::path root = tmp / "repo";
  Must(root, {"init"});
  // As tar -P writes it, and as tar -r appends a newer copy.
  WriteTar(tmp / "slash.tar", {{"/etc/a", '0', "", "a\n"}, {"/etc/h", '1', "/etc/a"}, {"/etc/a.conf", '0', "", "1\n"},
                               {"/etc/a.conf", '0', "", "2\n"}, {"d", '5'}, {"d", '5'}});
  CmdResult r = Must(root, {"import", (tmp / "slash.tar").string(), "--json"});
  std::string warnings = r.Json()["warnings"].dump();
  CHECK(warnings.find("4 name(s) began with '/', removed as GNU tar and bsdtar remove it: '/etc/a', '/etc/h', "
                      "'/etc/a.conf' and 1 more") != std::string::npos);
  CHECK(warnings.find("1 hardlink target(s) began with '/'") != std::string::npos);
  CHECK(warnings.find("the last entry of each wins, as tar -x lets it: 'etc/a.conf'") != std::string::npos);
  Must(root, {"restore", r.Json().value("node", "")});
  CHECK(ReadFile(Work(root) / "etc/a.conf") == "2\n");
  CHECK(Stat(Work(root) / "etc/h").st_ino == Stat(Work(root) / "etc/a").st_ino);

  // What both tools refuse stays refused: a file over a directory that
  // has entries, a write through a symlink, '..', a link out.
  const std::vector<std::pair<std::vector<TarEntry>, std::string>> refused = {
      {{{"d", '5'}, {"d/x", '0', "", "x"}, {"d", '0', "", "file"}}, "would replace a directory that is not empty"},
      {{{"d", '5'}, {"d", '2', "/etc"}, {"d/passwd", '0', "", "evil"}}, "symlink"},
      {{{"/../etc/passwd", '0', "", "evil"}}, "contains '..'"},
      {{{"h", '1', "/../../etc/shadow"}}, "points outside the archive"},
  };
  for (const auto& [entries, says] : refused) {
    INFO(says);
    WriteTar(tmp / "bad.tar", entries);
    CmdResult bad = Agentenv(root, {"import", (tmp / "bad.tar").string()});
    INFO(bad.Describe());
    CHECK(bad.code == 2);
    CHECK(bad.err.find(says) != std::string::npos);
  }
}

}  // namespace agentenv::test
