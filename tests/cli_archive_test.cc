// Archives round-trip everything a node records: the root directory's own
// metadata, POSIX ACLs, negative sub-second mtimes; what tar cannot hold
// (sockets) is named in a warning; import leaves no scratch behind.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <catch2/catch.hpp>

#include "tests/cli_exec_testutil.h"
#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

constexpr const char* kTar = "/usr/bin/tar";

struct Mtime {
  int64_t sec = 0;
  long nsec = 0;
  bool operator==(const Mtime&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Mtime& t) { return os << t.sec << "s+" << t.nsec << "ns"; }

Mtime MtimeOf(const fs::path& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return {st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

void SetMtime(const fs::path& p, Mtime t) {
  struct timespec ts[2] = {{0, UTIME_OMIT}, {time_t(t.sec), t.nsec}};
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}


CmdResult MustRun(const std::vector<std::string>& argv) {
  CmdResult r = RunCmd(argv);
  INFO(argv[0] + " " + (argv.size() > 1 ? argv[1] : "") + ": " + r.Describe());
  REQUIRE(r.code == 0);
  return r;
}

CmdResult MustAgentenv(const fs::path& root, const std::vector<std::string>& args) {
  CmdResult r = Agentenv(root, args);
  INFO("agentenv " + args[0] + ": " + r.Describe());
  REQUIRE(r.code == 0);
  return r;
}

// Imports `tar` into the repository at `root` and restores the new node
// into its live tree.
void ImportAndRestore(const fs::path& root, const fs::path& tar) {
  CmdResult r = MustAgentenv(root, {"import", tar.string(), "--json"});
  std::string node = r.Json().value("node", "");
  REQUIRE(!node.empty());
  MustAgentenv(root, {"restore", node});
}

// The umask of this process (and the agentenv it runs) until destruction.
class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

// src/f, src/d (the newest), src itself 0750 with its own mtime, owned by
// 4321:4321 when we are root; with-root.tar has its "./" entry,
// no-root.tar only f and d.
struct RootArchives {
  fs::path with_root, no_root;
  Mtime root_mtime{1200000000, 125000000}, newest{1100000000, 250000000};
  uid_t owner = ::geteuid();
};

RootArchives MakeRootArchives(const TempDir& tmp) {
  RootArchives a;
  fs::path src = tmp / "src";
  fs::create_directories(src / "d");
  WriteFile(src / "f", "file\n");
  SetMtime(src / "f", {1000000000, 500000000});
  SetMtime(src / "d", a.newest);
  REQUIRE(::chmod(src.c_str(), 0750) == 0);
  if (IsRoot()) {
    a.owner = 4321;
    REQUIRE(::chown(src.c_str(), 4321, 4321) == 0);
  }
  SetMtime(src, a.root_mtime);
  a.with_root = tmp / "with-root.tar";
  a.no_root = tmp / "no-root.tar";
  MustRun({kTar, "--format=pax", "--numeric-owner", "-C", src.string(), "-cf", a.with_root.string(), "."});
  MustRun({kTar, "--format=pax", "--numeric-owner", "-C", src.string(), "-cf", a.no_root.string(), "f", "d"});
  return a;
}

mode_t ModeOf(const fs::path& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

void CheckRoot(const fs::path& dir, mode_t mode, Mtime mtime, uid_t uid) {
  INFO(dir.string());
  struct stat st;
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == mode);
  CHECK(MtimeOf(dir) == mtime);
  CHECK(st.st_uid == uid);
}

}  // namespace

TEST_CASE("archive: import takes the root's mode, owner and mtime from './', without one 0755 and the newest mtime", "[archive]") {
  TempDir tmp;
  RootArchives a = MakeRootArchives(tmp);
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init"});
  Umask strict(077);  // the scratch directory's mode must not leak into the node
  ImportAndRestore(root, a.with_root);
  CheckRoot(Work(root), 0750, a.root_mtime, a.owner);
  ImportAndRestore(root, a.no_root);
  CheckRoot(Work(root), 0755, a.newest, ::geteuid());
}

TEST_CASE("archive: init --tarball keeps the root's mode, owner and mtime from './'", "[archive]") {
  TempDir tmp;
  RootArchives a = MakeRootArchives(tmp);
  Umask strict(077);
  fs::path with = tmp / "with", without = tmp / "without";
  MustAgentenv(with, {"init", "--tarball", a.with_root.string()});
  CheckRoot(Work(with), 0750, a.root_mtime, a.owner);
  MustAgentenv(without, {"init", "--tarball", a.no_root.string()});
  CheckRoot(Work(without), 0755, a.newest, ::geteuid());
  // The node has it too: its export's "./" says so.
  fs::path out = tmp / "out.tar";
  MustAgentenv(with, {"export", "HEAD", "-o", out.string()});
  CmdResult listed = MustRun({kTar, "--numeric-owner", "--full-time", "-tvf", out.string()});
  std::string first = listed.out.substr(0, listed.out.find('\n'));
  CHECK(first.rfind("drwxr-x--- " + std::to_string(a.owner) + "/" + std::to_string(a.owner), 0) == 0);
  CHECK(first.find(".125 ./") != std::string::npos);
}

TEST_CASE("archive: a damaged header or a root entry that is not a directory refuses the archive", "[archive]") {
  TempDir tmp;
  fs::path cwd = tmp / "cwd";
  fs::create_directories(cwd);
  REQUIRE(::chmod(cwd.c_str(), 0751) == 0);
  fs::path damaged = tmp / "damaged.tar";
  WriteTar(damaged, {{"a", '0', "", "one\n"}, {"b", '0', "", "two\n"}});
  std::string bytes = ReadFile(damaged);
  bytes[1024 + 10] ^= 0x7f;  // the name of "b": its checksum no longer matches
  WriteFile(damaged, bytes);
  fs::path file_root = tmp / "file-root.tar";
  WriteTar(file_root, {{".", '0', "", "x"}, {"a", '0', "", "one\n"}});
  for (const fs::path& tar : {damaged, file_root}) {
    INFO(tar);
    // Run from `cwd`: a failed unpack must not touch the caller's directory.
    CmdResult r = RunCmd({"/usr/bin/env", "-C", cwd.string(), AGENTENV_BIN, "init", "--tarball", tar.string(),
                          "--root", (tmp / "repo").string()});
    CHECK(r.code == 2);
    CHECK(r.err.find(tar.string() + ": ") != std::string::npos);
    CHECK(!fs::exists(tmp / "repo/work"));
    CHECK(ModeOf(cwd) == 0751);
  }
}

namespace {

std::string Getfacl(const fs::path& p) { return MustRun({"/usr/bin/getfacl", "-n", "-c", p.string()}).out; }

}  // namespace

TEST_CASE("archive: POSIX ACLs survive import, init --tarball, export and GNU tar", "[archive]") {
  REQUIRE(fs::exists("/usr/bin/setfacl"));  // scripts/install-deps.sh installs acl
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src / "d");
  WriteFile(src / "g", "acl\n");
  CmdResult set = RunCmd({"/usr/bin/setfacl", "-m", "u:1234:rw-,g:2345:r--", (src / "g").string()});
  if (set.code != 0) Skip("setfacl does not work here: " + set.err);
  MustRun({"/usr/bin/setfacl", "-m", "u:1234:rwx", "-d", "-m", "u:1234:r-x", (src / "d").string()});
  MustRun({"/usr/bin/setfacl", "-d", "-m", "g:2345:rwx", src.string()});
  std::map<std::string, std::string> want;
  for (const char* p : {"", "g", "d"}) want[p] = Getfacl(src / p);
  REQUIRE(want["g"].find("user:1234:rw-") != std::string::npos);
  REQUIRE(want["d"].find("default:user:1234:r-x") != std::string::npos);
  auto check = [&](const fs::path& dir) {
    for (const auto& [p, acl] : want) {
      INFO(dir / p);
      CHECK(Getfacl(dir / p) == acl);
    }
  };

  // GNU tar writes ACLs as SCHILY.acl.* records (--acls) and as the
  // system.posix_acl_* xattrs (--xattrs): either is enough.
  fs::path both = tmp / "both.tar", records = tmp / "records.tar";
  MustRun({kTar, "--format=pax", "--acls", "--xattrs", "-C", src.string(), "-cf", both.string(), "."});
  MustRun({kTar, "--format=pax", "--acls", "-C", src.string(), "-cf", records.string(), "."});
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init"});
  ImportAndRestore(root, records);
  check(Work(root));
  ImportAndRestore(root, both);
  check(Work(root));

  // The node's export carries them back out: to GNU tar, and to import.
  fs::path out = tmp / "out.tar";
  MustAgentenv(root, {"export", "HEAD", "-o", out.string()});
  fs::path gnu = tmp / "gnu";
  fs::create_directories(gnu);
  MustRun({kTar, "--xattrs", "--xattrs-include=*", "-C", gnu.string(), "-xpf", out.string()});
  check(gnu);
  fs::path again = tmp / "again";
  MustAgentenv(again, {"init", "--tarball", out.string()});
  check(Work(again));
  ImportAndRestore(root, out);
  check(Work(root));
}

TEST_CASE("archive: negative mtimes with a fraction are exported as POSIX pax says and read back exactly", "[archive]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src);
  // -1.000000001 s, -0.5 s (its integer part is -0) and -9.5 s (libarchive
  // writes it as "-10.5": the record changes length).
  const std::map<std::string, Mtime> times = {
      {"a", {-2, 999999999}}, {"b", {-1, 500000000}}, {"c", {-10, 500000000}}, {"p", {1700000000, 1}}};
  for (const auto& [name, t] : times) {
    WriteFile(src / name, name);
    SetMtime(src / name, t);
  }
  const Mtime root_time{-5, 250000000};
  SetMtime(src, root_time);
  REQUIRE(MtimeOf(src / "a") == Mtime{-2, 999999999});
  auto check = [&](const fs::path& dir) {
    for (const auto& [name, t] : times) {
      INFO(dir / name);
      CHECK(MtimeOf(dir / name) == t);
    }
  };
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init", "--from", src.string()});
  fs::path out = tmp / "out.tar";
  MustAgentenv(root, {"export", "HEAD", "-o", out.string()});
  std::string bytes = ReadFile(out);
  CHECK(bytes.find("mtime=-1.000000001\n") != std::string::npos);
  CHECK(bytes.find("mtime=-0.5\n") != std::string::npos);
  CHECK(bytes.find("mtime=-9.5\n") != std::string::npos);

  // GNU tar extracts the exact times, and lists the export as it lists its
  // own archive of the same files (GNU tar 1.34 prints a negative time's
  // fraction oddly, the same for both).
  fs::path gnu = tmp / "gnu";
  fs::create_directories(gnu);
  MustRun({kTar, "-C", gnu.string(), "-xpf", out.string()});
  check(gnu);
  fs::path own = tmp / "own.tar";
  MustRun({kTar, "--format=pax", "--numeric-owner", "-C", src.string(), "-cf", own.string(), "a", "b", "c", "p"});
  auto listing = [&](const fs::path& tar) {
    CmdResult r = MustRun({"/usr/bin/env", "TZ=UTC", kTar, "--numeric-owner", "--full-time", "-tvf", tar.string()});
    std::map<std::string, std::string> lines;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      std::string name = line.substr(line.rfind(' ') + 1);
      if (times.count(name)) lines[name] = line;
    }
    return lines;
  };
  CHECK(listing(out) == listing(own));

  // Export -> import and init --tarball give the same times back, and so
  // does GNU tar's own archive.
  ImportAndRestore(root, out);
  check(Work(root));
  fs::path again = tmp / "again";
  MustAgentenv(again, {"init", "--tarball", out.string()});
  check(Work(again));
  ImportAndRestore(again, own);
  check(Work(again));
  // Compressed archives go through the same rewriting.
  fs::path gz = tmp / "out.tar.gz";
  MustAgentenv(root, {"export", "HEAD", "-o", gz.string()});
  fs::path unzipped = tmp / "unzipped";
  fs::create_directories(unzipped);
  MustRun({kTar, "-C", unzipped.string(), "-xzpf", gz.string()});
  check(unzipped);
  // An OCI image carries the node's root metadata beside its layers.
  fs::path oci = tmp / "oci", from_oci = tmp / "from-oci";
  MustAgentenv(root, {"export", "HEAD", "--oci", oci.string()});
  MustAgentenv(from_oci, {"init", "--from-oci", oci.string()});
  check(Work(from_oci));
  CHECK(MtimeOf(Work(from_oci)) == root_time);
}

TEST_CASE("archive: export leaves sockets out and names each in a warning", "[archive]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src / "srv");
  WriteFile(src / "f", "f\n");
  for (const char* name : {"srv/a.sock", "srv/b.sock"}) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string p = (src / name).string();
    REQUIRE(p.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    ::close(fd);
  }
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init", "--from", src.string()});
  fs::path out = tmp / "out.tar";
  CmdResult r = MustAgentenv(root, {"export", "HEAD", "-o", out.string()});
  CHECK(r.err.find("warning: srv/a.sock: ") != std::string::npos);
  CHECK(r.err.find("warning: srv/b.sock: ") != std::string::npos);
  CHECK(r.out.find("warning") == std::string::npos);
  std::string names = MustRun({kTar, "-tf", out.string()}).out;
  CHECK(names.find("f\n") != std::string::npos);
  CHECK(names.find("sock") == std::string::npos);

  json j = AgentenvJson(root, {"export", "HEAD", "-o", out.string()});
  REQUIRE(j["warnings"].is_array());
  CHECK(j["warnings"].size() == 2);
  CHECK(j["warnings"][0].get<std::string>().rfind("srv/a.sock: ", 0) == 0);

  // To stdout the archive is alone there; the warnings still reach stderr.
  CmdResult piped = MustAgentenv(root, {"export", "HEAD", "-o", "-"});
  CHECK(piped.err.find("warning: srv/a.sock: ") != std::string::npos);
  CHECK(piped.out == ReadFile(out));
  CmdResult quiet = MustAgentenv(root, {"export", "HEAD", "-o", out.string(), "-q"});
  CHECK(quiet.err.find("warning: srv/b.sock: ") != std::string::npos);
  CHECK(quiet.err.find("warning: srv/b.sock: ") == quiet.err.rfind("warning: srv/b.sock: "));  // once
}

TEST_CASE("archive: export into a full filesystem says ENOSPC, names the filesystem and the remedy", "[archive]") {
  if (!IsRoot()) Skip("needs root to mount a size-limited tmpfs");
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src);
  std::vector<uint8_t> big = RandomBytes(6 << 20, 5);  // more than the filesystem holds, compressed or not
  WriteFile(src / "big", std::string(big.begin(), big.end()));
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init", "--from", src.string()});
  SmallTmpfs small(tmp / "mnt", "4m");
  REQUIRE(small.mounted());
  for (const char* name : {"out.tar", "out.tar.zst"}) {
    fs::path out = tmp / "mnt" / name;
    CmdResult r = Agentenv(root, {"export", "HEAD", "-o", out.string()});
    INFO(r.Describe());
    CHECK(r.code == 1);
    CHECK(r.err.find(out.string() + ": Write error: No space left on device") != std::string::npos);
    CHECK(r.err.find("the filesystem holding " + out.string() +
                     " is full: free space there, then run the command again") != std::string::npos);
    fs::remove(out);
  }
}

TEST_CASE("archive: an import with read-only directories leaves no scratch directory behind", "[archive]") {
  TempDir tmp;
  if (IsRoot()) REQUIRE(::chown(tmp.path().c_str(), 65534, 65534) == 0);
  fs::path src = tmp / "src";
  fs::create_directories(src / "ro/sub");
  WriteFile(src / "ro/f", "locked in\n");
  WriteFile(src / "ro/sub/g", "deeper\n");
  REQUIRE(::chmod((src / "ro/sub").c_str(), 0555) == 0);
  REQUIRE(::chmod((src / "ro").c_str(), 0555) == 0);
  fs::path tar = tmp / "ro.tar";
  MustRun({kTar, "--format=pax", "--numeric-owner", "--owner=65534", "--group=65534", "-C", src.string(), "-cf",
           tar.string(), "."});
  REQUIRE(::chmod(tar.c_str(), 0644) == 0);
  fs::path root = tmp / "repo";
  // As uid 65534 when we are root: root would remove anything.
  CmdResult init = Run(root, {"init"});
  INFO(init.Describe());
  REQUIRE(init.code == 0);
  CmdResult r = Run(root, {"import", tar.string()});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(root / "work"))
    if (e.path().filename().string().rfind("import-", 0) == 0) left.push_back(e.path().filename());
  CHECK(left.empty());
}

}  // namespace agentenv::test
