// Rootless runs keep the owners and setuid bits a rootfs archive names:
// the owner in user.agentenv.owner on the live file, the mode on the file.
#include <sys/xattr.h>

#include "tests/cli_exec_testutil.h"

namespace agentenv::test {
namespace {

// An archive made as root: root- and shadow-group-owned files, a setuid
// binary, a root-owned symlink (which cannot carry the owner xattr).
fs::path RootOwnedArchive(const TempDir& tmp) {
  fs::path src = tmp / "src";
  fs::create_directories(src / "etc");
  fs::create_directories(src / "usr/bin");
  WriteFile(src / "etc/shadow", "root:*:19000:0:99999:7:::\n");
  REQUIRE(::chown((src / "etc/shadow").c_str(), 0, 42) == 0);
  REQUIRE(::chmod((src / "etc/shadow").c_str(), 0640) == 0);
  WriteFile(src / "usr/bin/passwd", "#!/bin/sh\n");
  REQUIRE(::chmod((src / "usr/bin/passwd").c_str(), 04755) == 0);
  WriteFile(src / "usr/bin/mine", "owned by nobody\n");
  REQUIRE(::chown((src / "usr/bin/mine").c_str(), 65534, 65534) == 0);
  fs::create_symlink("passwd", src / "usr/bin/chpasswd");
  fs::path tar = tmp / "rootfs.tar";
  CmdResult r = RunCmd({"/usr/bin/tar", "--numeric-owner", "-C", src.string(), "-cf", tar.string(), "."});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  REQUIRE(::chown(tmp.path().c_str(), 65534, 65534) == 0);
  REQUIRE(::chmod(tar.c_str(), 0644) == 0);
  return tar;
}

json Entry(const fs::path& root, const std::string& ref, const std::string& path) {
  CmdResult r = Run(root, {"ls", ref, path, "--json"});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return r.Json()["entries"][0];
}

std::string OwnerXattr(const fs::path& p) {
  char buf[64];
  ssize_t n = ::lgetxattr(p.c_str(), "user.agentenv.owner", buf, sizeof buf);
  return n < 0 ? "" : std::string(buf, n);
}

}  // namespace

TEST_CASE("cli owners: a rootless init from a tarball keeps owners and setuid, warns with a count for what it cannot keep", "[cli][owner]") {
  if (::geteuid() != 0) Skip("needs root to make a root-owned archive and to run as uid 65534");
  TempDir tmp;
  fs::path tar = RootOwnedArchive(tmp);
  fs::path root = tmp / "repo";
  CmdResult init = Run(root, {"init", "--tarball", tar.string(), "--json"});
  INFO(init.Describe());
  REQUIRE(init.code == 0);
  // The symlink alone loses its owner, and says so with a count.
  std::string warnings = init.Json()["warnings"].dump();
  CHECK(warnings.find("usr/bin/chpasswd: owner 0:0 not kept") != std::string::npos);
  CHECK(warnings.find("1 symlink(s)") != std::string::npos);

  // History has what the archive says.
  json shadow = Entry(root, "HEAD", "etc/shadow");
  CHECK(shadow["uid"] == 0);
  CHECK(shadow["gid"] == 42);
  CHECK(shadow["mode"] == 0640);
  json passwd = Entry(root, "HEAD", "usr/bin/passwd");
  CHECK(passwd["uid"] == 0);
  CHECK(passwd["mode"] == 04755);
  CHECK(Entry(root, "HEAD", "usr/bin/mine")["uid"] == 65534);

  // The live tree: ours on disk, the real owner beside it, setuid kept.
  struct stat st;
  REQUIRE(::stat((Work(root) / "usr/bin/passwd").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  CHECK((st.st_mode & 07777) == 04755);
  CHECK(OwnerXattr(Work(root) / "usr/bin/passwd") == "0:0");
  CHECK(OwnerXattr(Work(root) / "etc/shadow") == "0:42");
  CHECK(OwnerXattr(Work(root) / "usr/bin/mine") == "");

  // Nothing looks changed, and a snapshot after a change keeps the owners.
  CmdResult status = Run(root, {"status", "--json"});
  REQUIRE(status.code == 0);
  CHECK(status.Json()["dirty"] == false);
  WriteOwned(Work(root) / "etc/motd", "hello\n");
  REQUIRE(Run(root, {"snap"}).code == 0);
  CHECK(Entry(root, "HEAD", "etc/shadow")["gid"] == 42);

  // Exports carry them: GNU tar lists root/shadow owners and the setuid bit.
  fs::path out = tmp / "out.tar";
  REQUIRE(Run(root, {"export", "HEAD", "-o", out.string()}).code == 0);
  CmdResult listed = RunCmd({"/usr/bin/tar", "--numeric-owner", "-tvf", out.string()});
  REQUIRE(listed.code == 0);
  CHECK(listed.out.find("-rwsr-xr-x 0/0") != std::string::npos);
  CHECK(listed.out.find("-rw-r----- 0/42") != std::string::npos);
}

TEST_CASE("cli owners: a rootless restore records the owners it cannot set, and the tree stays clean", "[cli][owner]") {
  if (::geteuid() != 0) Skip("needs root to make a root-owned archive and to run as uid 65534");
  TempDir tmp;
  fs::path tar = RootOwnedArchive(tmp);
  fs::path root = tmp / "repo";
  REQUIRE(Run(root, {"init", "--tarball", tar.string()}).code == 0);
  // Remove the files, snapshot, and restore them.
  fs::remove(Work(root) / "etc/shadow");
  fs::remove(Work(root) / "usr/bin/passwd");
  REQUIRE(Run(root, {"snap", "-m", "removed"}).code == 0);
  CmdResult restored = Run(root, {"restore", "HEAD~1", "--json"});
  INFO(restored.Describe());
  REQUIRE(restored.code == 0);
  CHECK(OwnerXattr(Work(root) / "etc/shadow") == "0:42");
  struct stat st;
  REQUIRE(::stat((Work(root) / "usr/bin/passwd").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 04755);
  CmdResult status = Run(root, {"status", "--json"});
  REQUIRE(status.code == 0);
  CHECK(status.Json()["dirty"] == false);
  CHECK(Entry(root, "HEAD", "etc/shadow")["gid"] == 42);
}

}  // namespace agentenv::test
