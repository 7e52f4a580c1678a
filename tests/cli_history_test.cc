// End-to-end tests of history as tarballs through the agentenv binary:
// export checked field by field against GNU tar's extraction, byte-exact
// repeatability, OCI whiteout layers, and import refusing hostile archives.
#include <archive.h>
#include <archive_entry.h>
#include <sys/sysmacros.h>

#include <catch2/catch.hpp>

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {


// Every xattr of p (any namespace) with its exact value, sorted.
std::string AllXattrs(const fs::path& p) {
  std::vector<char> names(65536);
  ssize_t n = ::llistxattr(p.c_str(), names.data(), names.size());
  if (n <= 0) return "";
  std::vector<std::string> list;
  for (ssize_t i = 0; i < n; i += ssize_t(std::strlen(names.data() + i)) + 1) {
    std::string name = names.data() + i;
    std::vector<char> val(65536);
    ssize_t m = ::lgetxattr(p.c_str(), name.c_str(), val.data(), val.size());
    list.push_back(name + "=" + std::string(val.data(), m > 0 ? size_t(m) : 0));
  }
  std::sort(list.begin(), list.end());
  std::string out;
  for (const auto& s : list) out += " [" + s + "]";
  return out;
}

// path -> every field export promises to keep: type, mode (incl.
// setuid/setgid/sticky), uid, gid, mtime in ns, xattrs, symlink target,
// device numbers, content, and which hardlink group the entry is in (named
// by the group's first path in sorted order). "." is the root itself.
Manifest FullManifest(const fs::path& root, bool dir_mtimes = true) {
  Manifest m;
  std::map<std::pair<dev_t, ino_t>, std::string> first_link;
  std::vector<std::string> paths = {"."};
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it)
    paths.push_back(it->path().lexically_relative(root).string());
  std::sort(paths.begin(), paths.end());
  for (const auto& rel : paths) {
    fs::path p = rel == "." ? root : root / rel;
    struct stat st;
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    std::ostringstream d;
    d << std::oct << (st.st_mode & 07777) << std::dec << " " << st.st_uid << ":" << st.st_gid;
    if (!S_ISDIR(st.st_mode) || dir_mtimes)
      d << " mtime=" << st.st_mtim.tv_sec << "." << std::setw(9) << std::setfill('0') << st.st_mtim.tv_nsec;
    switch (st.st_mode & S_IFMT) {
      case S_IFREG: d << " file " << st.st_size << " " << std::hex << Fnv1a(ReadFile(p)) << std::dec; break;
      case S_IFDIR: d << " dir"; break;
      case S_IFLNK: d << " link ->" << fs::read_symlink(p).string(); break;
      case S_IFIFO: d << " fifo"; break;
      case S_IFCHR: d << " chr " << major(st.st_rdev) << "," << minor(st.st_rdev); break;
      case S_IFBLK: d << " blk " << major(st.st_rdev) << "," << minor(st.st_rdev); break;
      default: d << " other " << (st.st_mode & S_IFMT);
    }
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
      auto [it, fresh] = first_link.try_emplace({st.st_dev, st.st_ino}, rel);
      d << " group=" << it->second;
    }
    d << AllXattrs(p);
    m[rel] = d.str();
  }
  return m;
}

void SetTimes(const fs::path& p, int64_t sec, long nsec) {
  timespec ts[2] = {{sec, nsec}, {sec, nsec}};
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}

void Own(const fs::path& p, uid_t u, gid_t g, mode_t mode) {
  REQUIRE(::lchown(p.c_str(), u, g) == 0);
  REQUIRE(::chmod(p.c_str(), mode) == 0);  // after chown, which clears setuid
}

void Xattr(const fs::path& p, const std::string& name, const std::string& value) {
  REQUIRE(::lsetxattr(p.c_str(), name.c_str(), value.data(), value.size(), 0) == 0);
}

// A tree with every kind of entry and every kind of metadata export keeps.
// Needs root (owners, device nodes, trusted.* xattrs).
void MakeRichTree(const fs::path& t) {
  fs::create_directories(t / "d/sub/deep");
  fs::create_directories(t / "sticky");
  fs::create_directories(t / "sgid");
  WriteFile(t / "a.txt", "alpha\n");
  WriteFile(t / "empty", "");
  auto big = RandomBytes(3 << 20, 11);  // larger than one chunk: stored as a manifest
  WriteFile(t / "d/big.bin", std::string(big.begin(), big.end()));
  WriteFile(t / "d/sub/deep/c.txt", "gamma\n");
  WriteFile(t / "d/sub/x", "x\n");
  WriteFile(t / "suid", "#!/bin/sh\n");
  WriteFile(t / "sgid/file", "g\n");
  WriteFile(t / "spaces in name", "s\n");
  WriteFile(t / std::string("bytes-\xff\xfe"), "not utf-8\n");
  std::string long_name(150, 'n');
  WriteFile(t / "d" / long_name, "long\n");
  WriteFile(t / "h1", "linked\n");
  fs::create_hard_link(t / "h1", t / "d/h2");
  fs::create_symlink("a.txt", t / "link");
  fs::create_symlink("/nonexistent/target", t / "dangling");
  REQUIRE(::mkfifo((t / "fifo").c_str(), 0640) == 0);
  REQUIRE(::mknod((t / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  REQUIRE(::mknod((t / "loop").c_str(), S_IFBLK | 0660, makedev(7, 200)) == 0);

  Own(t / "suid", 0, 0, 04755);
  Own(t / "sgid", 1234, 5678, 02775);
  Own(t / "sgid/file", 1000, 50, 02755);
  Own(t / "sticky", 0, 0, 01777);
  Own(t / "h1", 42, 43, 0600);
  Own(t / "fifo", 7, 8, 0640);
  Own(t / "d/big.bin", 1001, 1002, 0444);
  REQUIRE(::lchown((t / "link").c_str(), 9, 10) == 0);
  Xattr(t / "a.txt", "user.plain", "value");
  Xattr(t / "a.txt", "user.binary", std::string("\0\x01\xff bytes", 9));
  Xattr(t / "a.txt", "trusted.agentenv", "t");
  Xattr(t / "d", "user.dir", "on a directory");
  Xattr(t / "d/big.bin", "user.big", std::string(1000, 'v'));

  // Distinct ns mtimes everywhere; directories last, deepest first.
  std::vector<fs::path> all, dirs;
  for (const auto& e : fs::recursive_directory_iterator(t)) (e.is_directory() && !e.is_symlink() ? dirs : all).push_back(e.path());
  std::sort(all.begin(), all.end());
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.string() > b.string(); });
  long ns = 123456789;
  for (const auto& p : all) SetTimes(p, 1600000000 + ns % 1000, ns), ns += 1111;
  for (const auto& p : dirs) SetTimes(p, 1600001000 + ns % 1000, ns), ns += 1111;
  SetTimes(t, 1600002000, 987654321);
  REQUIRE(::chmod(t.c_str(), 0750) == 0);
}

// `agentenv init --from src` as root with a rich tree; skips when not root.
fs::path InitRich(const TempDir& tmp) {
  MakeRichTree(tmp / "src");
  fs::path root = tmp / "repo";
  CmdResult r = Agentenv(root, {"init", "--from", (tmp / "src").string()});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return root;
}

CmdResult GnuTarExtract(const fs::path& archive, const fs::path& dest) {
  fs::create_directories(dest);
  return RunCmd({"/usr/bin/tar", "--xattrs", "--xattrs-include=*", "-xpf", archive.string(), "-C", dest.string()});
}

// Entry names of an archive, in order (read with libarchive).
std::vector<std::string> ArchiveNames(const fs::path& path) {
  std::vector<std::string> out;
  archive* a = archive_read_new();
  archive_read_support_format_all(a);
  archive_read_support_filter_all(a);
  REQUIRE(archive_read_open_filename(a, path.c_str(), 65536) == ARCHIVE_OK);
  archive_entry* e;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) out.push_back(archive_entry_pathname(e));
  archive_read_free(a);
  return out;
}

}  // namespace

TEST_CASE("cli history: export extracted by GNU tar equals the live tree field by field", "[cli][export]") {
  if (!IsRoot()) Skip("needs root (owners, device nodes, trusted xattrs)");
  TempDir tmp;
  fs::path root = InitRich(tmp);
  Manifest live = FullManifest(Work(root));
  REQUIRE(ManifestDiff(FullManifest(tmp / "src"), live) == "");  // init kept everything too
  REQUIRE(live.size() > 20);

  fs::path out = tmp / "node.tar";
  int code = -1;
  json j = AgentenvJson(root, {"export", "HEAD", "-o", out.string()}, &code);
  REQUIRE(code == 0);
  // One entry per path, the root "." included.
  std::set<std::string> names;
  for (std::string n : ArchiveNames(out)) {
    if (n.size() > 1 && n.back() == '/') n.pop_back();
    CHECK(names.insert(n).second);
  }
  std::set<std::string> paths;
  for (const auto& [p, d] : live) paths.insert(p);
  std::string extra, missing;
  for (const auto& n : names) if (!paths.count(n)) extra += n + " ";
  for (const auto& p : paths) if (!names.count(p)) missing += p + " ";
  CHECK(extra == "");
  CHECK(missing == "");
  CHECK(j.value("entries", uint64_t(0)) == live.size());
  CmdResult x = GnuTarExtract(out, tmp / "x");
  INFO(x.Describe());
  REQUIRE(x.code == 0);
  CHECK(ManifestDiff(live, FullManifest(tmp / "x")) == "");
}

TEST_CASE("cli history: export gives the same bytes every time, plain, gz and zst", "[cli][export]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src / "dir");
  WriteFile(src / "a", "a\n");
  auto big = RandomBytes(1 << 20, 3);
  WriteFile(src / "dir/big", std::string(big.begin(), big.end()));
  fs::create_symlink("a", src / "l");
  fs::path root = tmp / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", src.string()}).code == 0);
  const char* exts[] = {".tar", ".tar.gz", ".tar.zst"};
  for (std::string ext : exts) REQUIRE(Agentenv(root, {"export", "HEAD", "-o", (tmp / ("one" + ext)).string()}).code == 0);
  // One wait for all three: a timestamp taken from the clock would now differ.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  for (std::string ext : exts) REQUIRE(Agentenv(root, {"export", "HEAD", "-o", (tmp / ("two" + ext)).string()}).code == 0);
  for (std::string ext : exts) {
    fs::path a = tmp / ("one" + ext), b = tmp / ("two" + ext);
    INFO(ext);
    std::string one = ReadFile(a);
    CHECK(one.size() > (1 << 19));
    CHECK(one == ReadFile(b));
    // Each decompresses to the plain tar's bytes.
    if (ext != ".tar") {
      CmdResult d = RunCmd({ext == ".tar.gz" ? "/usr/bin/gzip" : "/usr/bin/zstd", "-dc", a.string()});
      REQUIRE(d.code == 0);
      CHECK(d.out == ReadFile(tmp / "one.tar"));
    }
  }
}

TEST_CASE("cli history: export --diff-from is a layer with .wh. whiteouts that rebuilds the node", "[cli][export]") {
  if (!IsRoot()) Skip("needs root (owners, device nodes, trusted xattrs)");
  TempDir tmp;
  fs::path root = InitRich(tmp);
  std::string base = HeadId(root);
  fs::path w = Work(root);
  fs::remove_all(w / "d/sub");
  fs::remove(w / "a.txt");
  fs::remove(w / "null");
  WriteFile(w / "d/big.bin.new", "replaced\n");
  fs::rename(w / "d/big.bin.new", w / "d/big.bin");
  fs::create_directories(w / "new/dir");
  WriteFile(w / "new/dir/file", "new\n");
  REQUIRE(::chmod((w / "suid").c_str(), 0700) == 0);
  REQUIRE(Agentenv(root, {"snap", "-m", "changes"}).code == 0);

  fs::path layer = tmp / "layer.tar";
  int code = -1;
  json j = AgentenvJson(root, {"export", "HEAD", "--diff-from", base, "-o", layer.string()}, &code);
  REQUIRE(code == 0);
  CHECK(j.value("whiteouts", 0) == 3);
  std::vector<std::string> names = ArchiveNames(layer);
  std::set<std::string> set(names.begin(), names.end());
  INFO([&] { std::string s; for (auto& n : names) s += n + "\n"; return s; }());
  CHECK(set.count(".wh.a.txt"));
  CHECK(set.count("d/.wh.sub"));  // one whiteout for the whole deleted directory
  CHECK(set.count(".wh.null"));
  CHECK(set.count("d/big.bin"));
  CHECK(set.count("new/dir/file"));
  CHECK(set.count("suid"));
  for (const auto& n : names) {
    CHECK(n.rfind("d/sub/", 0) != 0);  // nothing below a deleted directory
    CHECK(n != "link");                // unchanged entries are not in the layer
    CHECK(n != "h1");
  }

  // Base export + layer with whiteouts applied = the new node.
  fs::path full = tmp / "base.tar";
  REQUIRE(Agentenv(root, {"export", base, "-o", full.string()}).code == 0);
  fs::path x = tmp / "x";
  REQUIRE(GnuTarExtract(full, x).code == 0);
  REQUIRE(GnuTarExtract(layer, x).code == 0);
  for (const auto& n : names) {
    fs::path p(n);
    std::string leaf = p.filename().string();
    if (leaf.rfind(".wh.", 0) != 0) continue;
    fs::remove_all(x / p.parent_path() / leaf.substr(4));
    fs::remove(x / p);
  }
  // Applying whiteouts changes directory mtimes; everything else must match.
  CHECK(ManifestDiff(FullManifest(w, false), FullManifest(x, false)) == "");
}

TEST_CASE("cli history: an exported node imports as the same tree", "[cli][import]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src / "dir/sub");
  WriteFile(src / "a", "a\n");
  WriteFile(src / "dir/sub/b", "b\n");
  fs::create_hard_link(src / "a", src / "dir/a-again");
  fs::create_symlink("../a", src / "dir/l");
  fs::path root = tmp / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", src.string()}).code == 0);
  std::string head = HeadId(root);
  fs::path out = tmp / "n.tar.zst";
  REQUIRE(Agentenv(root, {"export", "HEAD", "-o", out.string()}).code == 0);
  int code = -1;
  json j = AgentenvJson(root, {"import", out.string(), "-m", "round trip"}, &code);
  REQUIRE(code == 0);
  std::string imported = j.value("node", "");
  REQUIRE(imported.size() == 64);
  CHECK(HeadId(root) == head);  // import does not move HEAD
  json a = AgentenvJson(root, {"show", head}), b = AgentenvJson(root, {"show", imported});
  CHECK(a["node"].value("tree", "x") == b["node"].value("tree", "y"));
  CHECK(b["node"].value("parent", "") == head);
}

namespace {

// Pack file names and sizes: equal before and after means nothing was stored.
std::map<std::string, uintmax_t> PackFiles(const fs::path& root) {
  std::map<std::string, uintmax_t> m;
  for (const auto& e : fs::directory_iterator(root / "store/packs")) m[e.path().filename()] = e.file_size();
  return m;
}

// argv run as uid/gid 65534 with no supplementary groups.
std::vector<std::string> AsNobody(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  return argv;
}

}  // namespace

TEST_CASE("cli history: import refuses hostile archives and changes nothing", "[cli][import]") {
  const bool nobody = GENERATE(false, true);
  if (!IsRoot()) Skip("needs root: one half runs as root, the other switches to uid 65534");
  TempDir tmp;
  REQUIRE(::chmod(tmp.path().c_str(), 0755) == 0);
  fs::path outside = tmp / "outside";
  fs::create_directories(outside);
  WriteFile(outside / "secret", "original\n");
  REQUIRE(::chmod(outside.c_str(), 0777) == 0);  // writable for uid 65534 too: only agentenv stands in the way
  REQUIRE(::chmod((outside / "secret").c_str(), 0666) == 0);
  const std::string out = outside.string();
  fs::path src = tmp / "src", root = tmp / "repo";
  fs::create_directories(src / "dir");
  WriteFile(src / "dir/f", "f\n");
  fs::create_directories(root);
  if (nobody) {
    for (const auto& p : {src, src / "dir", src / "dir/f", root}) REQUIRE(::chown(p.c_str(), 65534, 65534) == 0);
  }
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), AGENTENV_BIN);
    args.push_back("--root");
    args.push_back(root.string());
    return RunCmd(nobody ? AsNobody(args) : args);
  };
  CmdResult init = run({"init", "--from", src.string()});
  INFO(init.Describe());
  REQUIRE(init.code == 0);

  struct Case {
    const char* what;
    std::vector<TarEntry> entries;
    const char* says;  // the error names this
  };
  std::vector<Case> cases = {
      {"dot-dot entry", {{"ok.txt", '0', "", "ok"}, {"../../outside/dotdot", '0', "", "evil"}}, "'..'"},
      {"dot-dot inside a path", {{"a/../../../outside/mid", '0', "", "evil"}}, "'..'"},
      {"dot-dot after a leading '/'", {{"/../outside/absolute", '0', "", "evil"}}, "'..'"},
      {"write through an absolute symlink", {{"s", '2', out}, {"s/through", '0', "", "evil"}}, "symlink"},
      {"write through a relative symlink", {{"r", '2', "../../../outside"}, {"r/through", '0', "", "evil"}}, "symlink"},
      {"directory replaced by a symlink, then written through",
       {{"d", '5'}, {"d", '2', out}, {"d/through", '0', "", "evil"}}, "symlink"},
      {"hardlink with ..", {{"h", '1', "../../outside/secret", "PWNED\n"}}, "outside"},
      {"absolute hardlink", {{"h", '1', out + "/secret", "PWNED\n"}}, "names no entry before it"},
      {"hardlink through a symlink", {{"s", '2', out}, {"h", '1', "s/secret", "PWNED\n"}}, "symlink"},
      {"hardlink to a symlink, then data written through it",
       {{"s", '2', out + "/secret"}, {"h", '1', "s", "PWNED\n", 0, 0, true}}, "'h'"},
  };
  if (nobody) cases.push_back({"device node without privilege", {{"dev-null", '3', "", "", 1, 3}}, "device"});

  std::string head = HeadId(root);
  REQUIRE(head.size() == 64);
  for (const auto& c : cases) {
    SECTION(c.what) {
      Manifest live = TreeManifest(Work(root));
      auto packs = PackFiles(root);
      fs::path archive = tmp / "hostile.tar";
      WriteTar(archive, c.entries);
      CmdResult r = run({"import", archive.string()});
      INFO(c.what << (nobody ? " (uid 65534)" : " (root)") << "\n" << r.Describe());
      CHECK(r.code == 2);
      CHECK(r.err.rfind("agentenv: " + archive.string() + ": ", 0) == 0);
      CHECK(r.err.find(c.says) != std::string::npos);
      CHECK(r.err.find("refus") != std::string::npos);
      // Nothing escaped and nothing changed.
      CHECK(TreeManifest(outside).size() == 1);
      CHECK(ReadFile(outside / "secret") == "original\n");
      struct stat st;
      REQUIRE(::lstat((outside / "secret").c_str(), &st) == 0);
      CHECK(st.st_nlink == 1);
      for (const char* p : {"dotdot", "mid", "absolute", "through"}) {
        CHECK_FALSE(fs::exists(tmp / p));
        CHECK_FALSE(fs::exists(outside / p));
      }
      CHECK(HeadId(root) == head);
      CHECK(AgentenvJson(root, {"log"})["nodes"].size() == 1);
      CHECK(ManifestDiff(live, TreeManifest(Work(root))) == "");
      CHECK(PackFiles(root) == packs);
      std::vector<std::string> left;
      for (const auto& e : fs::directory_iterator(root / "work"))
        if (e.path().filename() != "current") left.push_back(e.path().filename());
      CHECK(left.empty());
    }
  }
}

}  // namespace agentenv::test

namespace agentenv::test {

TEST_CASE("cli history: fsck --repair marks damaged nodes, fsck then passes, restore refuses them", "[cli][fsck]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src);
  WriteFile(src / "keep", "keep\n");
  fs::path root = tmp / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", src.string()}).code == 0);
  std::string a = HeadId(root);
  auto big = RandomBytes(1 << 20, 5);  // incompressible: most of the pack is this file
  WriteFile(Work(root) / "big.bin", std::string(big.begin(), big.end()));
  REQUIRE(Agentenv(root, {"snap", "-m", "big"}).code == 0);
  std::string b = HeadId(root);
  fs::remove(Work(root) / "big.bin");
  REQUIRE(Agentenv(root, {"snap", "-m", "without big"}).code == 0);
  std::string c = HeadId(root);

  int code = -1;
  json j = AgentenvJson(root, {"fsck"}, &code);
  CHECK(code == 0);
  CHECK(j["live"].value("dirty", true) == false);
  CHECK(j.value("damaged", 99) == 0);

  fs::path biggest;
  uintmax_t size = 0;
  for (const auto& e : fs::directory_iterator(root / "store/packs"))
    if (e.file_size() > size) size = e.file_size(), biggest = e.path();
  REQUIRE(size > (1 << 19));
  {
    // Several bytes across the middle of the pack: big.bin's chunks may be
    // spread over packs by the writer threads, and one flipped byte could
    // land in the alignment padding between raw records.
    UniqueFd fd(::open(biggest.c_str(), O_RDWR));
    REQUIRE(fd);
    for (int k = 3; k <= 5; ++k) {
      off_t at = off_t(size * k / 8);
      unsigned char x;
      REQUIRE(::pread(fd.get(), &x, 1, at) == 1);
      x ^= 0x5a;
      REQUIRE(::pwrite(fd.get(), &x, 1, at) == 1);
    }
  }
  j = AgentenvJson(root, {"fsck"}, &code);
  CHECK(code == 4);

  j = AgentenvJson(root, {"fsck", "--repair"}, &code);
  CHECK(code == 0);
  CHECK_FALSE(j["lost"].empty());
  REQUIRE(j["marked"].size() == 1);
  CHECK(j["marked"][0].value("id", "") == b);
  CHECK(j["marked"][0].value("damaged", false));
  CHECK(j.value("damaged", 0) == 1);

  // Afterwards fsck passes: the damage is known, reported as a warning.
  CmdResult r = Agentenv(root, {"fsck"});
  INFO(r.Describe());
  CHECK(r.code == 0);
  CHECK(r.err.find("warning: node " + b.substr(0, 12) + " (marked damaged)") != std::string::npos);
  CHECK(r.out.find("1 nodes known damaged") != std::string::npos);
  CHECK(r.out.find("live tree clean") != std::string::npos);

  // log, show and JSON say so; no node was deleted.
  json log = AgentenvJson(root, {"log"});
  REQUIRE(log["nodes"].size() == 3);
  for (const auto& n : log["nodes"]) {
    CHECK(n.value("damaged", true) == (n.value("id", "") == b));
    if (n.value("id", "") == b) CHECK(n.value("damage", "").find("missing") != std::string::npos);
  }
  CHECK(Agentenv(root, {"log"}).out.find("[damaged] big") != std::string::npos);
  CHECK(Agentenv(root, {"show", b}).out.find("DAMAGED  file big.bin") != std::string::npos);
  CHECK(AgentenvJson(root, {"show", b})["node"].value("damaged", false));

  // Restore refuses it, naming what is missing, and changes nothing.
  Manifest before = TreeManifest(Work(root));
  r = Agentenv(root, {"restore", b});
  INFO(r.Describe());
  CHECK(r.code == 4);
  CHECK(r.err.find("is damaged and cannot be restored: file big.bin") != std::string::npos);
  CHECK(HeadId(root) == c);
  CHECK(ManifestDiff(before, TreeManifest(Work(root))) == "");
  CHECK(Agentenv(root, {"restore", a}).code == 0);

  // The live tree is information, never an error.
  WriteFile(Work(root) / "keep", "changed\n");
  j = AgentenvJson(root, {"fsck"}, &code);
  CHECK(code == 0);
  CHECK(j["live"].value("dirty", false));
  CHECK(j["live"].value("changed", 0) == 1);
}

}  // namespace agentenv::test

namespace agentenv::test {
namespace {

uintmax_t PackBytes(const fs::path& root) {
  uintmax_t n = 0;
  for (const auto& e : fs::directory_iterator(root / "store/packs")) {
    struct stat st;
    if (::stat(e.path().c_str(), &st) == 0) n += uintmax_t(st.st_blocks) * 512;
  }
  return n;
}

}  // namespace

TEST_CASE("cli history: retain then gc returns the space of dropped nodes, shared content stays", "[cli][gc]") {
  TempDir tmp;
  fs::path src = tmp / "src";
  fs::create_directories(src);
  auto shared = RandomBytes(2 << 20, 21);  // in every node
  WriteFile(src / "shared", std::string(shared.begin(), shared.end()));
  fs::path root = tmp / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", src.string()}).code == 0);
  for (int i = 0; i < 10; ++i) {  // each node has one file of its own
    auto own = RandomBytes(64 << 10, 100 + i);
    if (i) fs::remove(Work(root) / ("own" + std::to_string(i - 1)));
    WriteFile(Work(root) / ("own" + std::to_string(i)), std::string(own.begin(), own.end()));
    REQUIRE(Agentenv(root, {"snap", "-m", "n" + std::to_string(i)}).code == 0);
  }
  int code = -1;
  json r = AgentenvJson(root, {"retain", "--keep-last", "2", "--keep-within", "0"}, &code);
  REQUIRE(code == 0);
  REQUIRE(AgentenvJson(root, {"log", "-n", "100"})["nodes"].size() < 6);
  uintmax_t before = PackBytes(root);

  // The dropped nodes' files are ~20% of the data. Which packs they share
  // with the rest depends on how init's parallel writers spread it, so the
  // default threshold may or may not rewrite a pack; 10% surely does.
  json g = AgentenvJson(root, {"gc"}, &code);
  REQUIRE(code == 0);
  CHECK(g.value("dropped_objects", 0) >= 6);
  int rewritten = g.value("packs_rewritten", 0);
  uint64_t freed = g.value("bytes_freed", uint64_t(0));
  g = AgentenvJson(root, {"gc", "--compact-above", "10"}, &code);
  REQUIRE(code == 0);
  CHECK(rewritten + g.value("packs_rewritten", 0) >= 1);
  CHECK(freed + g.value("bytes_freed", uint64_t(0)) > (300u << 10));
  uintmax_t after = PackBytes(root);
  INFO("pack bytes " << before << " -> " << after);
  CHECK(after + (300u << 10) < before);
  CHECK(after > (2u << 20));  // the shared file is still there
  CHECK(Agentenv(root, {"fsck"}).code == 0);
  REQUIRE(Agentenv(root, {"restore", "HEAD~1"}).code == 0);
  CHECK(ReadFile(Work(root) / "shared") == std::string(shared.begin(), shared.end()));
  CHECK(fs::exists(Work(root) / "own8"));
  CHECK(Agentenv(root, {"gc", "--compact-above", "101"}).code == 2);
  // A full recount agrees: nothing is left unreferenced.
  g = AgentenvJson(root, {"gc", "--full"}, &code);
  REQUIRE(code == 0);
  CHECK(g.value("counted", false));
  CHECK(g.value("objects_read", 0) > 0);
  CHECK(g.value("dropped_objects", 99) == 0);
  CHECK(Agentenv(root, {"fsck"}).code == 0);
}

}  // namespace agentenv::test
