// Archives round-trip everything a node records: the root directory's own
// metadata, POSIX ACLs, negative sub-second mtimes; what tar cannot hold
// (sockets) is named in a warning; import leaves no scratch behind; a
// sparse file costs its data; names that are not UTF-8 reach both tools.
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

TEST_CASE("archive: POSIX ACLs survive import, init --tarball, export, GNU tar and bsdtar", "[archive]") {
  REQUIRE(fs::exists("/usr/bin/setfacl"));  // scripts/install-deps.sh installs acl
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src / "d");
  WriteFile(src / "g", "acl\n");
  // A mask wider than the group entry: the mode's group bits are the mask's.
  CmdResult set = RunCmd({"/usr/bin/setfacl", "-m", "u:1234:rw-,g:2345:r--,g::r--,m::rwx", (src / "g").string()});
  if (set.code != 0) Skip("setfacl does not work here: " + set.err);
  MustRun({"/usr/bin/setfacl", "-m", "u:1234:rwx", "-d", "-m", "u:1234:r-x", (src / "d").string()});
  MustRun({"/usr/bin/setfacl", "-d", "-m", "g:2345:rwx", src.string()});
  std::map<std::string, std::string> want;
  for (const char* p : {"", "g", "d"}) want[p] = Getfacl(src / p);
  REQUIRE(want["g"].find("user:1234:rw-") != std::string::npos);
  REQUIRE(want["d"].find("default:user:1234:r-x") != std::string::npos);
  // bsdtar sets a default ACL only on directories it makes, never on the
  // one it extracts into.
  auto check = [&](const fs::path& dir, bool root = true) {
    for (const auto& [p, acl] : want) {
      if (p.empty() && !root) continue;
      INFO(dir / p);
      CHECK(Getfacl(dir / p) == acl);
    }
    CHECK(ModeOf(dir / "g") == ModeOf(src / "g"));
  };

  // GNU tar writes ACLs as SCHILY.acl.* records (--acls) and as the
  // system.posix_acl_* xattrs (--xattrs): either is enough.
  fs::path both = tmp / "both.tar", records = tmp / "records.tar", xattrs = tmp / "xattrs.tar";
  MustRun({kTar, "--format=pax", "--acls", "--xattrs", "-C", src.string(), "-cf", both.string(), "."});
  MustRun({kTar, "--format=pax", "--acls", "-C", src.string(), "-cf", records.string(), "."});
  MustRun({kTar, "--format=pax", "--xattrs", "--xattrs-include=*", "-C", src.string(), "-cf", xattrs.string(), "."});
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init"});
  for (const fs::path& archive : {records, both, xattrs}) {
    INFO(archive);
    ImportAndRestore(root, archive);
    check(Work(root));
  }

  // The node's export carries them as the tools read them: SCHILY.acl
  // text, numeric ids, not the xattrs (which bsdtar does not set).
  fs::path out = tmp / "out.tar";
  MustAgentenv(root, {"export", "HEAD", "-o", out.string()});
  std::string bytes = ReadFile(out);
  CHECK(bytes.find("SCHILY.acl.access=") != std::string::npos);
  CHECK(bytes.find("SCHILY.acl.default=") != std::string::npos);
  CHECK(bytes.find("posix_acl") == std::string::npos);
  fs::path gnu = tmp / "gnu", bsd = tmp / "bsd";
  fs::create_directories(gnu);
  fs::create_directories(bsd);
  MustRun({kTar, "--xattrs", "--xattrs-include=*", "--acls", "-C", gnu.string(), "-xpf", out.string()});
  MustRun({"/usr/bin/bsdtar", "-C", bsd.string(), "-xpf", out.string()});
  check(gnu);
  check(bsd, false);
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

TEST_CASE("archive: a sparse file's export costs its data and a map, and both tools make it sparse again", "[archive]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src);
  // 512-byte data regions 1 MiB apart: 8 data blocks of 4 KiB in 9 MiB.
  {
    UniqueFd fd(::open((src / "sparse").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(fd);
    std::string region(512, 'd');
    for (off_t at = 0; at < (off_t(8) << 20); at += off_t(1) << 20)
      REQUIRE(::pwrite(fd.get(), region.data(), region.size(), at + 1000) == ssize_t(region.size()));
    REQUIRE(::ftruncate(fd.get(), off_t(9) << 20) == 0);
  }
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init", "--from", src.string()});
  fs::path out = tmp / "out.tar";
  MustAgentenv(root, {"export", "HEAD", "-o", out.string()});
  // Its data as a filesystem holds it (8 blocks of 4 KiB), the headers and
  // the map: a few KiB more, where whole 256 KiB chunks were written.
  INFO(fs::file_size(out) << " bytes");
  CHECK(fs::file_size(out) <= 8 * 4096 + 8 * 1024);
  for (const char* tar : {"/usr/bin/tar", "/usr/bin/bsdtar"}) {
    INFO(tar);
    fs::path x = tmp / (std::string("x-") + fs::path(tar).filename().string());
    fs::create_directories(x);
    CmdResult r = RunCmd({tar, "-xf", out.string(), "-C", x.string()});
    CHECK(r.code == 0);
    CHECK(r.err == "");
    CHECK(ReadFile(x / "sparse") == ReadFile(src / "sparse"));
    struct stat st;
    REQUIRE(::stat((x / "sparse").c_str(), &st) == 0);
    CHECK(uint64_t(st.st_blocks) * 512 <= 8 * 4096);  // its holes are holes again
  }
  // And it imports as the node it came from.
  CmdResult again = MustAgentenv(root, {"import", out.string(), "--json"});
  fs::path back = tmp / "back.tar";
  MustAgentenv(root, {"export", again.Json().value("node", ""), "-o", back.string()});
  CHECK(ReadFile(back) == ReadFile(out));
}

TEST_CASE("archive: a name that is not UTF-8 goes in ustar's fields, hdrcharset only where it does not fit", "[archive]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src / "d");
  const std::string short_name = "caf\xe9", long_name = std::string(120, 'n') + "\xe9";
  WriteFile(src / "d" / short_name, "short\n");
  fs::create_symlink(short_name, src / "d" / ("l\xe9"));
  fs::path root = tmp / "repo";
  MustAgentenv(root, {"init", "--from", src.string()});
  fs::path out = tmp / "out.tar";
  MustAgentenv(root, {"export", "HEAD", "-o", out.string()});
  // GNU tar does not know hdrcharset and warns about it; bsdtar fails on
  // a pax path that is not UTF-8 without it: ustar's fields trouble neither.
  CHECK(ReadFile(out).find("hdrcharset") == std::string::npos);
  for (const char* tar : {"/usr/bin/tar", "/usr/bin/bsdtar"}) {
    INFO(tar);
    CmdResult list = RunCmd({tar, "-tvf", out.string()});
    CHECK(list.code == 0);
    CHECK(list.err == "");
    fs::path x = tmp / (std::string("x-") + fs::path(tar).filename().string());
    fs::create_directories(x);
    CmdResult r = RunCmd({tar, "-xf", out.string(), "-C", x.string()});
    CHECK(r.code == 0);
    CHECK(ReadFile(x / "d" / short_name) == "short\n");
    CHECK(fs::read_symlink(x / "d" / ("l\xe9")) == short_name);
  }
  // A name too long for the name field keeps its pax path and the
  // hdrcharset it needs: bsdtar reads it silently, GNU tar with a warning
  // about the keyword, and both extract the exact bytes.
  WriteFile(Work(root) / long_name, "long\n");
  MustAgentenv(root, {"snap"});
  MustAgentenv(root, {"export", "HEAD", "-o", out.string()});
  CHECK(ReadFile(out).find("hdrcharset=BINARY") != std::string::npos);
  for (const char* tar : {"/usr/bin/tar", "/usr/bin/bsdtar"}) {
    INFO(tar);
    fs::path x = tmp / (std::string("long-") + fs::path(tar).filename().string());
    fs::create_directories(x);
    CmdResult r = RunCmd({tar, "-xf", out.string(), "-C", x.string()});
    CHECK(r.code == 0);
    CHECK(ReadFile(x / long_name) == "long\n");
  }
}

}  // namespace agentenv::test
