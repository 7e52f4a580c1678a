// Real archives in and out, against the reference tools: libarchive's own
// test archives (tests/fixtures/libarchive, whose README names their
// origin) and archives GNU tar and bsdtar make here of a tree with POSIX
// ACLs, a sparse file, hardlinks, devices, xattrs and names that are not
// UTF-8. Each is imported and its node compared entry by entry with what
// `bsdtar -xpf --numeric-owner` makes of it; importing it again gives the
// same node; the node's export is extracted by bsdtar and by GNU tar and
// compared the same way, ACLs included; importing the export gives the
// node back.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

#include <catch2/catch.hpp>

#include "tests/cli_exec_testutil.h"
#include "tests/cli_testutil.h"
#include "tests/tar_compare.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

constexpr const char* kGnuTar = "/usr/bin/tar";
constexpr const char* kBsdtar = "/usr/bin/bsdtar";

// Archives of the fixtures where agentenv and bsdtar do not both unpack:
// each refused with exit 2, and why.
const std::map<std::string, std::string> kRefused = {
    {"test_read_format_tar_V_negative_size.tar.gz", "a negative base-256 size (GNU tar refuses it too)"},
    {"test_read_pax_empty_val_no_nl.tar.gz", "a pax record without its newline (GNU tar and bsdtar refuse it too)"},
    {"test_read_format_tar_acl_oob_read.tar.gz", "a damaged ACL record (bsdtar refuses it too)"},
    {"test_read_format_tar_invalid_pax_size.tar.gz", "a pax size that is not a number (bsdtar refuses it too)"},
    {"test_read_format_tar_pax_g_large.tar.gz", "a global pax header over 1 MiB (bsdtar refuses it too)"},
    {"test_read_format_tar_pax_large_attr.tar.gz", "a pax header over 1 MiB (bsdtar refuses it too)"},
    {"test_read_format_gtar_sparse_skip_entry.tar.gz", "a truncated sparse entry (bsdtar refuses it too)"},
    {"test_patterns_4.tar.gz", "names with '..' (bsdtar refuses them too)"},
};

// The umask of this process (and what it runs) until destruction.
class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

// Archives bsdtar extracts with an error (exit 1) that agentenv imports,
// and why; the trees are compared all the same.
const std::map<std::string, std::string> kBsdtarFails = {
    {"test_acl_pax_posix1e.tar.gz", "ACLs the kernel refuses (named entries, no mask): both warn, neither sets them"},
    {"test_compat_star_acl_posix1e.tar.gz", "ACLs the kernel refuses (named entries, no mask): both warn, neither sets them"},
    {"test_pax_filename_encoding.tar.gz", "a UTF-8 pax path this locale cannot convert: both write its bytes"},
    {"test_read_format_tar_empty_filename.tar.gz",
     "an entry with an empty name, a directory: bsdtar skips it, agentenv takes it for the root, as './'"},
};

CmdResult Must(const std::vector<std::string>& argv) {
  CmdResult r = RunCmd(argv);
  INFO(argv[0] << " " << (argv.size() > 1 ? argv[1] : "") << ": " << r.Describe());
  REQUIRE(r.code == 0);
  return r;
}

std::string ImportNode(const fs::path& root, const fs::path& archive) {
  CmdResult r = Agentenv(root, {"import", archive.string(), "--json"});
  INFO("import " << archive << ": " << r.Describe());
  REQUIRE(r.code == 0);
  return r.Json().value("node", "");
}

// The directories of `tree` no entry of the archive names.
std::set<std::string> Implied(const TreeEntries& tree, const std::set<std::string>& names) {
  std::set<std::string> out;
  for (const auto& [rel, e] : tree)
    if (e.dir && !names.count(rel)) out.insert(rel);
  return out;
}

// Whether a name of `names` is not UTF-8 and too long for ustar's name
// field: its export keeps hdrcharset, which GNU tar does not know.
bool LongBinaryName(const std::set<std::string>& names) {
  for (const std::string& n : names) {
    std::string base = fs::path(n).filename().string();
    bool ascii = std::all_of(base.begin(), base.end(), [](unsigned char c) { return c < 0x80; });
    if (!ascii && base.size() > 100) return true;
  }
  return false;
}

// Imports `archive` into a repository and checks its node against bsdtar's
// extraction (or the tree `source` it was made of), its import again, and
// its export through both tools.
void CheckArchive(const TempDir& tmp, const fs::path& archive, const fs::path& source = {}) {
  const std::string name = archive.filename().string();
  // A repository of its own: restore leaves ignored directories alone.
  fs::path root = tmp / ("repo-" + name);
  REQUIRE(Agentenv(root, {"init"}).code == 0);
  fs::path ref = tmp / ("ref-" + name), out = tmp / ("export-" + name + ".tar");
  fs::create_directories(ref);
  CmdResult bsd = RunCmd({kBsdtar, "-xpf", archive.string(), "--numeric-owner", "-C", ref.string()});
  CmdResult imported = Agentenv(root, {"import", archive.string(), "--json"});
  INFO(name << "\nbsdtar: " << bsd.Describe() << "\nagentenv: " << imported.Describe());
  if (auto it = kRefused.find(name); it != kRefused.end()) {
    INFO("expected to be refused: " << it->second);
    CHECK(imported.code == 2);
    return;
  }
  REQUIRE(imported.code == 0);
  if (auto it = kBsdtarFails.find(name); it != kBsdtarFails.end()) {
    INFO("bsdtar is expected to fail here: " << it->second);
    CHECK(bsd.code == 1);
  } else if (source.empty()) {
    CHECK(bsd.code == 0);
  }
  const std::string node = imported.Json().value("node", "");
  const std::set<std::string> names = ArchiveNames(archive);
  CmdResult restored = Agentenv(root, {"restore", node});
  INFO(restored.Describe());
  REQUIRE(restored.code == 0);
  // bsdtar drops a directory's default ACL when an archive also carries it
  // as a GNU tar xattr: a tree made here is its own reference.
  TreeEntries want = DescribeTree(source.empty() ? ref : source);
  std::set<std::string> implied = Implied(want, names);
  CHECK(CompareTrees(want, DescribeTree(Work(root)), implied) == "");

  // The same archive, the same node: their exports are the same bytes.
  Must({AGENTENV_BIN, "--root", root.string(), "export", node, "-o", out.string()});
  fs::path again = tmp / ("again-" + name + ".tar");
  Must({AGENTENV_BIN, "--root", root.string(), "export", ImportNode(root, archive), "-o", again.string()});
  CHECK(ReadFile(out) == ReadFile(again));

  // Both tools extract the export as bsdtar extracted the archive.
  fs::path by_bsdtar = tmp / ("bsdtar-" + name), by_gnu = tmp / ("gnu-" + name);
  fs::create_directories(by_bsdtar);
  fs::create_directories(by_gnu);
  Must({kBsdtar, "-xpf", out.string(), "--numeric-owner", "-C", by_bsdtar.string()});
  Must({kGnuTar, "-xpf", out.string(), "--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls", "-C",
        by_gnu.string()});
  CHECK(CompareTrees(want, DescribeTree(by_bsdtar), implied) == "");
  CHECK(CompareTrees(want, DescribeTree(by_gnu), implied) == "");
  // Both list it without a word.
  CmdResult gnu_list = Must({kGnuTar, "-tvf", out.string()});
  std::string hdrcharset = std::string(kGnuTar) + ": Ignoring unknown extended header keyword 'hdrcharset'\n";
  if (LongBinaryName(names))
    for (size_t at; (at = gnu_list.err.find(hdrcharset)) != std::string::npos;) gnu_list.err.erase(at, hdrcharset.size());
  CHECK(gnu_list.err == "");
  CmdResult bsd_list = Must({kBsdtar, "-tvf", out.string()});
  CHECK(bsd_list.err == "");

  // The export imports as the node it came from.
  Must({AGENTENV_BIN, "--root", root.string(), "export", ImportNode(root, out), "-o", again.string()});
  CHECK(ReadFile(out) == ReadFile(again));
  for (const fs::path& p : {ref, by_bsdtar, by_gnu, root}) fs::remove_all(p);
}

// A tree with what a rootfs holds and tar tools differ on.
void MakeTree(const fs::path& src) {
  fs::create_directories(src / "etc/skel");
  fs::create_directories(src / "srv/shared");
  WriteFile(src / "etc/hostname", "box\n");
  WriteFile(src / "etc/skel/.profile", "PATH=/bin\n");
  fs::create_hard_link(src / "etc/hostname", src / "etc/hostname.bak");
  fs::create_symlink("../etc/hostname", src / "srv/name");
  REQUIRE(::mkfifo((src / "srv/fifo").c_str(), 0640) == 0);
  REQUIRE(::mknod((src / "srv/null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  // Access and default ACLs, named entries and a mask wider than the group.
  WriteFile(src / "srv/shared/report", "acl\n");
  Must({"/usr/bin/setfacl", "-m", "u:1234:rwx,g:2345:r--,g::r--,m::rwx", (src / "srv/shared/report").string()});
  Must({"/usr/bin/setfacl", "-m", "u:1234:rwx", "-d", "-m", "u:1234:r-x,g:20:rwx", (src / "srv/shared").string()});
  Must({"/usr/bin/setfattr", "-n", "user.origin", "-v", "interop", (src / "etc/hostname").string()});
  // A sparse file: 512-byte data regions 1 MiB apart.
  {
    UniqueFd fd(::open((src / "srv/sparse").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    REQUIRE(fd);
    std::string block(512, 's');
    for (off_t at = 0; at < (off_t(8) << 20); at += off_t(1) << 20)
      REQUIRE(::pwrite(fd.get(), block.data(), block.size(), at) == ssize_t(block.size()));
    REQUIRE(::ftruncate(fd.get(), off_t(9) << 20) == 0);
  }
  // Names that are not UTF-8, short and too long for ustar's fields.
  WriteFile(src / "srv" / "caf\xe9", "latin-1\n");
  WriteFile(src / "srv" / (std::string(120, 'n') + "\xe9"), "long latin-1\n");
  // Owners no passwd names, and a group this host calls something else.
  REQUIRE(::lchown((src / "srv/shared/report").c_str(), 32757, 20) == 0);
  REQUIRE(::lchown((src / "etc/skel").c_str(), 1000, 1000) == 0);
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1700000000, 123456789}};
    ::utimensat(AT_FDCWD, e.path().c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }
}

}  // namespace

TEST_CASE("tar interop: libarchive's test archives import as bsdtar extracts them, and export back through both tools",
          "[cli][import][export][interop]") {
  if (!IsRoot()) Skip("needs root: bsdtar -xp gives the archives' owners and makes their devices only as root");
  Umask normal(022);  // the tools make implied directories by the umask
  TempDir tmp;
  std::vector<fs::path> fixtures;
  for (const auto& e : fs::directory_iterator(fs::path(AGENTENV_SOURCE_DIR) / "tests/fixtures/libarchive"))
    if (e.path().extension() == ".gz") fixtures.push_back(e.path());
  std::sort(fixtures.begin(), fixtures.end());
  REQUIRE(fixtures.size() > 60);
  for (const fs::path& f : fixtures) CheckArchive(tmp, f);
}

TEST_CASE("tar interop: archives GNU tar and bsdtar make of a tree with ACLs, a sparse file and odd names",
          "[cli][import][export][interop]") {
  if (!IsRoot()) Skip("needs root: the tree has owners and a device only root can give");
  Umask normal(022);
  TempDir tmp;
  fs::path src = tmp / "src";
  MakeTree(src);
  fs::path gnu = tmp / "gnu.tar", bsd = tmp / "bsd.tar", gnu_files = tmp / "gnu-files.tar";
  Must({kGnuTar, "--format=pax", "--acls", "--xattrs", "--xattrs-include=*", "--sparse", "--numeric-owner", "-C",
        src.string(), "-cf", gnu.string(), "."});
  Must({kBsdtar, "--format=pax", "--acls", "--xattrs", "-S", "--numeric-owner", "-C", src.string(), "-cf",
        bsd.string(), "."});
  // Files only: their directories are implied.
  Must({kGnuTar, "--format=pax", "--acls", "--sparse", "-C", src.string(), "-cf", gnu_files.string(),
        "etc/hostname", "srv/shared/report", "srv/sparse"});
  CheckArchive(tmp, gnu, src);
  CheckArchive(tmp, bsd, src);
  CheckArchive(tmp, gnu_files);
}

}  // namespace agentenv::test
