// Package deltas (snap/packages.h): what a node installed, read from real
// trees snapshotted through snap::Repo, and the parsers under them fed
// what an agent could write.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "snap/diff.h"
#include "snap/package_parse.h"
#include "snap/packages.h"
#include "snap/repo.h"
#include "tests/snap_testutil.h"

namespace agentenv::test {
namespace {

using snap::DpkgState;
using snap::Ecosystem;
using snap::PackageDelta;
using snap::PackageDeltas;

// ---- trees

void Write(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  REQUIRE(WriteFileAt(path, content));
}

struct Deb {
  std::string name, version, status = "install ok installed", arch = "amd64";
};

// A status file as dpkg writes it: each paragraph with the fields dpkg
// keeps (a long Description included), `filler` more lines of it.
std::string StatusFile(const std::vector<Deb>& debs, int filler = 3) {
  std::string s;
  for (const Deb& d : debs) {
    s += "Package: " + d.name + "\nStatus: " + d.status + "\nPriority: optional\nSection: misc\n";
    s += "Installed-Size: 123\nMaintainer: Someone <someone@example.org>\nArchitecture: " + d.arch + "\n";
    s += "Version: " + d.version + "\nDepends: libc6 (>= 2.34)\nDescription: the " + d.name + " package\n";
    for (int i = 0; i < filler; ++i) s += " line " + std::to_string(i) + " of a long description, Version: 0 Package: x\n";
    s += "\n";
  }
  return s;
}

std::string Auto(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += "Package: " + n + "\nArchitecture: amd64\nAuto-Installed: 1\n\n";
  return s;
}

snap::SnapResult SnapLabelled(snap::Repo& r, const std::string& label = "", const std::string& message = "") {
  snap::SnapOptions o;
  o.label = label;
  o.message = message;
  auto s = r.Snapshot(o);
  REQUIRE(s);
  REQUIRE(s->node);
  return std::move(*s);
}

PackageDelta Apt(char op, const std::string& name, const std::string& old_v, const std::string& new_v, bool dep = false) {
  return PackageDelta{Ecosystem::kApt, op, name, old_v, new_v, "", dep};
}

const std::vector<Deb> kBase = {{"base-files", "12.4"}, {"libc6", "2.36-9"}, {"openssl", "3.0.11-1"}};

// ---- through the repository

TEST_CASE("packages: apt install, upgrade, removal and an unfinished install, from dpkg's status file",
          "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  Write(w + "/var/lib/dpkg/status", StatusFile(kBase));
  Write(w + "/etc/hostname", "box\n");
  snap::SnapResult first = SnapLabelled(*repo);
  // The first node installed all of them.
  CHECK(first.packages.items == std::vector<PackageDelta>{Apt('+', "base-files", "", "12.4"),
                                                          Apt('+', "libc6", "", "2.36-9"),
                                                          Apt('+', "openssl", "", "3.0.11-1")});

  // apt-get install -y jq: jq asked for, its two libraries as dependencies.
  std::vector<Deb> with_jq = kBase;
  with_jq.insert(with_jq.end(), {{"jq", "1.6-2.1"}, {"libjq1", "1.6-2.1"}, {"libonig5", "6.9.8-1"}});
  Write(w + "/var/lib/dpkg/status", StatusFile(with_jq));
  Write(w + "/var/lib/apt/extended_states", Auto({"libjq1", "libonig5"}));
  Write(w + "/usr/bin/jq", "jq binary\n");
  snap::SnapResult jq = SnapLabelled(*repo, "exec: apt-get install -y jq");
  CHECK(jq.packages.items == std::vector<PackageDelta>{Apt('+', "jq", "", "1.6-2.1"),
                                                       Apt('+', "libjq1", "", "1.6-2.1", true),
                                                       Apt('+', "libonig5", "", "6.9.8-1", true)});
  CHECK(jq.label == "apt +jq 1.6-2.1 +libjq1 +libonig5; exec: apt-get install -y jq");
  auto rec = repo->Record(*jq.node);
  REQUIRE(rec);
  CHECK(rec->title == jq.label);
  REQUIRE(rec->packages);
  CHECK(*rec->packages == jq.packages);
  auto node = snap::LoadNode(repo->store(), *jq.node);
  REQUIRE(node);
  CHECK(node->label == jq.label);

  // An upgrade.
  std::vector<Deb> upgraded = with_jq;
  upgraded[2].version = "3.0.13-1";
  Write(w + "/var/lib/dpkg/status", StatusFile(upgraded));
  snap::SnapResult up = SnapLabelled(*repo, "exec: apt-get upgrade -y");
  CHECK(up.packages.items == std::vector<PackageDelta>{Apt('~', "openssl", "3.0.11-1", "3.0.13-1")});
  CHECK(up.label == "apt ~openssl 3.0.11-1 -> 3.0.13-1; exec: apt-get upgrade -y");

  // Removal: purged (gone) and removed (config-files) both count.
  std::vector<Deb> removed = {upgraded[0], upgraded[1], upgraded[2], {"jq", "1.6-2.1", "deinstall ok config-files"}};
  Write(w + "/var/lib/dpkg/status", StatusFile(removed));
  snap::SnapResult rm = SnapLabelled(*repo);
  CHECK(rm.packages.items == std::vector<PackageDelta>{Apt('-', "jq", "1.6-2.1", ""), Apt('-', "libjq1", "1.6-2.1", ""),
                                                       Apt('-', "libonig5", "6.9.8-1", "")});
  CHECK(rm.label.starts_with("apt -jq 1.6-2.1 -libjq1 1.6-2.1 -libonig5 6.9.8-1; "));

  // dpkg stopped midway (a failing postinst): not installed, and said so.
  std::vector<Deb> broken = removed;
  broken.push_back({"nginx", "1.22.1-9", "install ok half-configured"});
  broken.push_back({"dpkg", "1.21.22", "install ok triggers-pending"});
  Write(w + "/var/lib/dpkg/status", StatusFile(broken));
  snap::SnapResult half = SnapLabelled(*repo);
  CHECK(half.packages.items ==
        std::vector<PackageDelta>{Apt('+', "dpkg", "", "1.21.22"), Apt('!', "nginx", "", "1.22.1-9")});
  CHECK(half.label.starts_with("apt +dpkg 1.21.22 !nginx 1.22.1-9 (unfinished); "));
}

TEST_CASE("packages: a status file past one chunk is read from the snapshot's own uncommitted batch",
          "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  std::vector<Deb> many;
  for (int i = 0; i < 1500; ++i) many.push_back({"pkg" + std::to_string(10000 + i), "1." + std::to_string(i)});
  std::string before = StatusFile(many, 8);
  REQUIRE(before.size() > 512 * 1024);  // a manifest of several chunks, not one chunk
  Write(w + "/var/lib/dpkg/status", before);
  snap::SnapResult first = SnapLabelled(*repo);
  CHECK(first.packages.items.size() == PackageDeltas::kMaxListed);
  CHECK(first.packages.omitted.at(Ecosystem::kApt) == 1500 - PackageDeltas::kMaxListed);
  CHECK(first.label.starts_with("apt +pkg10000 1.0 +pkg10001 1.1 "));
  CHECK(first.label.find(" more); ") != std::string::npos);
  CHECK(first.label.size() < 300);

  many.erase(many.begin() + 700);
  many[1200].version = "2.0";
  many.push_back({"zz-new", "0.1"});
  Write(w + "/var/lib/dpkg/status", StatusFile(many, 8));
  snap::SnapResult next = SnapLabelled(*repo, "exec: apt-get dist-upgrade");
  CHECK(next.packages.items == std::vector<PackageDelta>{Apt('-', "pkg10700", "1.700", ""),
                                                         Apt('~', "pkg11201", "1.1201", "2.0"),
                                                         Apt('+', "zz-new", "", "0.1")});
}

TEST_CASE("packages: pip distributions in a venv, an upgrade by name, and the distribution's own left to apt",
          "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  const std::string site = "root/proj/.venv/lib/python3.11/site-packages";
  Write(w + "/root/proj/main.py", "print(1)\n");
  SnapLabelled(*repo);

  auto dist = [&](const std::string& dir, const std::string& name, const std::string& version, bool requested) {
    Write(w + "/" + site + "/" + dir + "/METADATA",
          "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\nSummary: x\n\nName: not-this\n");
    Write(w + "/" + site + "/" + dir + "/RECORD", "x\n");
    if (requested) Write(w + "/" + site + "/" + dir + "/REQUESTED", "");
  };
  dist("requests-2.31.0.dist-info", "requests", "2.31.0", true);
  dist("urllib3-2.0.7.dist-info", "urllib3", "2.0.7", false);
  dist("charset_normalizer-3.3.2.dist-info", "charset-normalizer", "3.3.2", false);
  Write(w + "/" + site + "/requests/__init__.py", "");
  // Debian's python3-yaml: apt reports it, pip does not.
  Write(w + "/usr/lib/python3/dist-packages/PyYAML-6.0.egg-info/PKG-INFO", "Name: PyYAML\nVersion: 6.0\n");
  // An egg-info file (not a directory) in /usr/local.
  Write(w + "/usr/local/lib/python3.11/dist-packages/six-1.16.0.egg-info", "Metadata-Version: 1.1\nName: six\nVersion: 1.16.0\n");
  snap::SnapResult in = SnapLabelled(*repo, "exec: pip install requests six");
  const PackageDelta six{Ecosystem::kPip, '+', "six", "", "1.16.0", "usr/local/lib/python3.11/dist-packages", false};
  CHECK(in.packages.items ==
        std::vector<PackageDelta>{{Ecosystem::kPip, '+', "requests", "", "2.31.0", site, false}, six,
                                  {Ecosystem::kPip, '+', "charset-normalizer", "", "3.3.2", site, true},
                                  {Ecosystem::kPip, '+', "urllib3", "", "2.0.7", site, true}});
  CHECK(in.label == "pip +requests 2.31.0 +six 1.16.0 +charset-normalizer +urllib3; exec: pip install requests six");

  std::filesystem::remove_all(w + "/" + site + "/requests-2.31.0.dist-info");
  dist("requests-2.32.3.dist-info", "requests", "2.32.3", true);
  snap::SnapResult up = SnapLabelled(*repo);
  CHECK(up.packages.items ==
        std::vector<PackageDelta>{{Ecosystem::kPip, '~', "requests", "2.31.0", "2.32.3", site, false}});
  CHECK(up.label.starts_with("pip ~requests 2.31.0 -> 2.32.3; "));

  std::filesystem::remove_all(w + "/" + site + "/urllib3-2.0.7.dist-info");
  snap::SnapResult rm = SnapLabelled(*repo);
  CHECK(rm.packages.items == std::vector<PackageDelta>{{Ecosystem::kPip, '-', "urllib3", "2.0.7", "", site, false}});
}

TEST_CASE("packages: npm names the package asked for and counts its dependencies", "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  const std::string app = w + "/root/app";
  Write(app + "/package.json", R"({"name": "app", "dependencies": {"left-pad": "^1.3.0", "@types/node": "^20"}})");
  SnapLabelled(*repo);

  auto pkg = [&](const std::string& dir, const std::string& name, const std::string& version) {
    Write(dir + "/package.json", R"({"name": ")" + name + R"(", "version": ")" + version +
                                     R"(", "scripts": {"test": "x"}, "dependencies": {"q": "1"}})");
    Write(dir + "/index.js", "module.exports = 1;\n");
  };
  pkg(app + "/node_modules/left-pad", "left-pad", "1.3.0");
  pkg(app + "/node_modules/@types/node", "@types/node", "20.11.5");
  for (int i = 0; i < 10; ++i) pkg(app + "/node_modules/dep" + std::to_string(i), "dep" + std::to_string(i), "1.0.0");
  pkg(app + "/node_modules/left-pad/node_modules/inner", "inner", "0.0.1");
  pkg(app + "/node_modules/.cache/x", "not-a-package", "1");  // a dot directory is no package
  snap::SnapResult in = SnapLabelled(*repo, "exec: npm install");
  REQUIRE(in.packages.items.size() == 13);
  CHECK(in.packages.items[0] == PackageDelta{Ecosystem::kNpm, '+', "@types/node", "", "20.11.5", "root/app/node_modules", false});
  CHECK(in.packages.items[1] == PackageDelta{Ecosystem::kNpm, '+', "left-pad", "", "1.3.0", "root/app/node_modules", false});
  CHECK(in.packages.items[2].dependency);
  CHECK(in.label == "npm +@types/node 20.11.5 +left-pad 1.3.0 (+11 deps); exec: npm install");

  // A global install: no project package.json, so it was asked for.
  pkg(w + "/usr/local/lib/node_modules/typescript", "typescript", "5.3.3");
  pkg(app + "/node_modules/left-pad", "left-pad", "1.3.1");  // package.json rewritten in place
  snap::SnapResult more = SnapLabelled(*repo);
  CHECK(more.packages.items ==
        std::vector<PackageDelta>{{Ecosystem::kNpm, '~', "left-pad", "1.3.0", "1.3.1", "root/app/node_modules", false},
                                  {Ecosystem::kNpm, '+', "typescript", "", "5.3.3", "usr/local/lib/node_modules", false}});

  std::filesystem::remove_all(app + "/node_modules/dep3");
  snap::SnapResult rm = SnapLabelled(*repo);
  CHECK(rm.packages.items ==
        std::vector<PackageDelta>{{Ecosystem::kNpm, '-', "dep3", "1.0.0", "", "root/app/node_modules", true}});
  CHECK(rm.label.starts_with("npm -dep3; "));  // three dependencies or fewer are named
}

TEST_CASE("packages: a new git repository is named, one without HEAD is not", "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  Write(w + "/root/proj/README", "hi\n");
  SnapLabelled(*repo);
  Write(w + "/root/proj/.git/HEAD", "ref: refs/heads/main\n");
  Write(w + "/root/proj/.git/config", "[core]\n");
  REQUIRE(std::filesystem::create_directories(w + "/root/proj/.git/objects"));
  Write(w + "/root/other/.git/config", "not a repository\n");
  snap::SnapResult init = SnapLabelled(*repo, "exec: git init");
  CHECK(init.packages.items == std::vector<PackageDelta>{{Ecosystem::kGit, '+', "proj", "", "", "root/proj", false}});
  CHECK(init.label == "new git repo /root/proj; exec: git init");
  std::filesystem::remove_all(w + "/root/proj/.git");
  CHECK(SnapLabelled(*repo).label.starts_with("removed git repo /root/proj; "));
}

TEST_CASE("packages: a snapshot that changes no package database reads none and labels as before",
          "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  Write(w + "/var/lib/dpkg/status", StatusFile(kBase));
  Write(w + "/root/app/node_modules/x/package.json", R"({"name":"x","version":"1"})");
  store::ObjectId a = SnapLabelled(*repo).node.value();
  Write(w + "/etc/motd", "hello\n");
  Write(w + "/var/lib/dpkg/status-old", "not the status file\n");
  Write(w + "/root/app/node_modules/x/index.js", "1\n");
  snap::SnapResult b = SnapLabelled(*repo);
  CHECK(b.packages.empty());
  CHECK(b.label.starts_with("+"));  // the file summary, unchanged
  auto rec = repo->Record(*b.node);
  REQUIRE(rec);
  REQUIRE(rec->packages);  // recorded as none, not unknown
  CHECK(rec->packages->empty());

  // The same diff watched directly: not one object read.
  size_t reads = 0;
  const store::Store& s = repo->store();
  auto trees = [&s](const store::ObjectId& id) { return snap::LoadTree(s, id); };
  auto objects = [&](const store::ObjectId& id) {
    ++reads;
    return s.Get(id);
  };
  auto d = snap::PackageDeltasBetween(trees, objects, TreeOf(*repo, a), rec->tree);
  REQUIRE(d);
  CHECK(d->empty());
  CHECK(reads == 0);
}

TEST_CASE("packages: AGENTENV_PACKAGES=off records none, Repo::Packages computes them from the trees",
          "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  Write(w + "/var/lib/dpkg/status", StatusFile(kBase));
  SnapLabelled(*repo);
  std::vector<Deb> more = kBase;
  more.push_back({"curl", "7.88.1-10"});
  Write(w + "/var/lib/dpkg/status", StatusFile(more));
  ::setenv("AGENTENV_PACKAGES", "off", 1);
  auto off = repo->Snapshot({});
  ::unsetenv("AGENTENV_PACKAGES");
  REQUIRE(off);
  REQUIRE(off->node);
  CHECK(off->packages.empty());
  CHECK(off->label.find("apt") == std::string::npos);
  auto rec = repo->Record(*off->node);
  REQUIRE(rec);
  CHECK_FALSE(rec->packages);
  auto computed = repo->Packages(*off->node);
  REQUIRE(computed);
  CHECK(computed->items == std::vector<PackageDelta>{Apt('+', "curl", "", "7.88.1-10")});
}

TEST_CASE("packages: retention recomputes a reparented node's packages and keeps its command", "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  const int64_t t0 = int64_t(1700000000) * 1000000000;
  auto snap_at = [&](int64_t ns, const std::string& label) {
    snap::SnapOptions o;
    o.label = label;
    o.time_ns = ns;
    auto s = repo->Snapshot(o);
    REQUIRE(s);
    REQUIRE(s->node);
    return *s;
  };
  // root <- x (kept: the oldest of its time slot) <- jq (dropped) <- curl (HEAD)
  Write(w + "/var/lib/dpkg/status", StatusFile(kBase));
  snap_at(t0, "");
  Write(w + "/etc/x", "x\n");
  snap_at(t0 + 1, "");
  std::vector<Deb> debs = kBase;
  debs.push_back({"jq", "1.6-2.1"});
  Write(w + "/var/lib/dpkg/status", StatusFile(debs));
  snap_at(t0 + 2, "exec: apt-get install -y jq");
  debs.push_back({"curl", "7.88.1-10"});
  Write(w + "/var/lib/dpkg/status", StatusFile(debs));
  snap::SnapResult last = snap_at(t0 + 3, "exec: apt-get install -y curl");
  CHECK(last.label == "apt +curl 7.88.1-10; exec: apt-get install -y curl");

  snap::RetentionPolicy p;
  p.keep_last = 0;
  p.keep_within = std::chrono::seconds(0);
  p.buckets = {{std::chrono::hours(24 * 365), std::chrono::hours(24 * 365 * 100)}};
  auto res = repo->Retain(p, false, t0 + 10);
  REQUIRE(res);
  REQUIRE(res->dropped.size() == 1);
  auto rec = repo->Record(*last.node);
  REQUIRE(rec);
  REQUIRE(rec->packages);
  CHECK(rec->packages->items ==
        std::vector<PackageDelta>{Apt('+', "curl", "", "7.88.1-10"), Apt('+', "jq", "", "1.6-2.1")});
  CHECK(rec->title == "apt +curl 7.88.1-10 +jq 1.6-2.1; exec: apt-get install -y curl");
}

TEST_CASE("packages: hostile package databases: no crash, a snapshot all the same", "[snap][packages]") {
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  Write(w + "/etc/x", "1\n");
  SnapLabelled(*repo);
  std::string junk = RandomString(300000, 7);
  Write(w + "/var/lib/dpkg/status", junk + "\n\nPackage: real\nStatus: install ok installed\nVersion: 1\n\n");
  Write(w + "/var/lib/apt/extended_states", junk);
  Write(w + "/srv/node_modules/deep/package.json", std::string(200000, '[') + std::string(200000, ']'));
  Write(w + "/srv/node_modules/notjson/package.json", junk.substr(0, 5000));
  Write(w + "/srv/node_modules/ctl/package.json", R"({"name": "ctl\u0007\u001b[31m", "version": "1"})");
  Write(w + "/srv/node_modules/raw/package.json", "{\"name\": \"raw\xff\xfe\", \"version\": \"1\"}");
  Write(w + "/srv/site-packages/evil-1.dist-info/METADATA", "Name: ev\x01il\xc0\xaf\nVersion: " + std::string(1000, '9') + "\n");
  snap::SnapResult s = SnapLabelled(*repo, "exec: ./attack");
  INFO(s.label);
  std::map<std::string, PackageDelta> by;
  for (const PackageDelta& d : s.packages.items) by[d.name] = d;
  CHECK(by.count("real"));
  CHECK(by.count("deep"));     // unparseable: named from its path
  CHECK(by.count("notjson"));
  CHECK(by.count("ctl??[31m"));  // control characters are not printed
  CHECK(by.count("raw"));        // not UTF-8: not JSON, named from its path
  CHECK(by.count("ev?il??"));  // an overlong version is not believed; the name is made printable
  CHECK(by["ev?il??"].new_version.empty());
  for (char c : s.label) CHECK((uint8_t(c) >= 0x20 && c != 0x7f));
  CHECK(s.label.ends_with("; exec: ./attack"));
}

TEST_CASE("packages: the bench rootfs's own dpkg status, edited as apt would", "[snap][packages][rootfs]") {
  const std::string status = "/var/tmp/agentenv-bench/rootfs/var/lib/dpkg/status";
  if (!std::filesystem::exists(status)) Skip(status + ": absent (bench/make_rootfs.sh builds it)");
  std::string text = ReadFileAt(status);
  auto db = snap::ParseDpkgStatus(text);
  REQUIRE(db);
  REQUIRE(db->size() > 50);
  TempDir t;
  auto repo = MakeRepo(t.str() + "/repo");
  const std::string w = repo->work_dir();
  Write(w + "/var/lib/dpkg/status", text);
  snap::SnapResult first = SnapLabelled(*repo);
  size_t installed = 0;
  for (const auto& [k, p] : *db) installed += p.state == DpkgState::kInstalled;
  CHECK(first.packages.items.size() + (first.packages.omitted.empty() ? 0 : first.packages.omitted.at(Ecosystem::kApt)) ==
        installed);

  // Remove the first paragraph, bump the version of the second, add one.
  size_t end1 = text.find("\n\n");
  REQUIRE(end1 != std::string::npos);
  std::string removed_para = text.substr(0, end1);
  std::string rest = text.substr(end1 + 2);
  auto field = [](const std::string& para, const std::string& name) {
    size_t at = para.find("\n" + name + ": ");
    at = at == std::string::npos ? (para.starts_with(name + ": ") ? 0 : std::string::npos) : at + 1;
    REQUIRE(at != std::string::npos);
    size_t from = at + name.size() + 2;
    return para.substr(from, para.find('\n', from) - from);
  };
  std::string second = rest.substr(0, rest.find("\n\n"));
  std::string second_name = field(second, "Package"), second_version = field(second, "Version");
  size_t vat = rest.find("\nVersion: " + second_version + "\n");
  REQUIRE(vat != std::string::npos);
  rest.replace(vat, second_version.size() + 11, "\nVersion: " + second_version + "+agentenv1\n");
  rest += "\nPackage: agentenv-test\nStatus: install ok installed\nArchitecture: all\nVersion: 0.1\n";
  Write(w + "/var/lib/dpkg/status", rest);
  snap::SnapResult edit = SnapLabelled(*repo, "exec: apt-get install agentenv-test");
  std::vector<PackageDelta> want = {Apt('+', "agentenv-test", "", "0.1"),
                                    Apt('-', field(removed_para, "Package"), field(removed_para, "Version"), ""),
                                    Apt('~', second_name, second_version, second_version + "+agentenv1")};
  std::sort(want.begin(), want.end(), [](const PackageDelta& x, const PackageDelta& y) { return x.name < y.name; });
  CHECK(edit.packages.items == want);
}

// ---- parsers and labels on their own

TEST_CASE("packages: dpkg status parsing: states, architectures, continuation lines, caps", "[snap][packages]") {
  auto db = snap::ParseDpkgStatus(
      "Package: a\nStatus: install ok installed\nVersion: 1\nArchitecture: amd64\nDescription: x\n"
      " Package: fake\n Version: 9\n\n\n"
      "package: b\r\nstatus: deinstall ok config-files\r\nversion: 2\r\n\r\n"
      "Package: c\nStatus: install reinstreq half-installed\nVersion: 3\n\n"
      "Package: d\nStatus: hold ok triggers-awaited\nVersion: 4\nArchitecture: i386\n\n"
      "Version: 5\nStatus: install ok installed\n\n"
      "Package: " + std::string(300, 'e') + "\nStatus: install ok installed\nVersion: 6\n");
  REQUIRE(db);
  CHECK(db->size() == 4);
  CHECK(db->at("a:amd64") == snap::DpkgPackage{"a", "amd64", "1", DpkgState::kInstalled});
  CHECK(db->at("b:").state == DpkgState::kConfigFiles);
  CHECK(db->at("c:").state == DpkgState::kUnfinished);
  CHECK(db->at("d:i386").state == DpkgState::kInstalled);
  CHECK(snap::ParseDpkgStatus("")->empty());
  std::string many;
  for (size_t i = 0; i <= snap::kMaxDpkgPackages; ++i) many += "Package: p\n\n";
  CHECK_FALSE(snap::ParseDpkgStatus(many));
  CHECK_FALSE(snap::ParseDpkgStatus(std::string(snap::kMaxDpkgText + 1, '\n')));

  // A foreign architecture is named with it.
  auto old_db = snap::ParseDpkgStatus("Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1\n");
  auto new_db = snap::ParseDpkgStatus(
      "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1\n\n"
      "Package: libc6\nStatus: install ok installed\nArchitecture: i386\nVersion: 1\n");
  REQUIRE(old_db);
  REQUIRE(new_db);
  CHECK(new_db->size() == 2);
}

TEST_CASE("packages: extended_states, METADATA and package.json parsing", "[snap][packages]") {
  auto a = snap::ParseAptAutoInstalled("Package: x\nArchitecture: amd64\nAuto-Installed: 1\n\nPackage: y\nAuto-Installed: 0\n");
  REQUIRE(a);
  CHECK(*a == std::set<std::string>{"x:amd64"});

  auto m = snap::ParsePyMetadata("Metadata-Version: 2.1\nName: Foo.Bar\nVersion: 1.0\n\nName: body\n");
  REQUIRE(m);
  CHECK(m->name == "Foo.Bar");
  CHECK(m->version == "1.0");
  CHECK_FALSE(snap::ParsePyMetadata("Metadata-Version: 2.1\n\nName: only-in-body\n"));
  CHECK(snap::NormalizePyName("Foo.._Bar-baz") == "foo-bar-baz");

  auto j = snap::ParsePackageJson(
      R"({"name":"a","version":"1.2.3","nested":{"name":"no","version":"no"},"dependencies":{"b":"1","c":{"x":1}},)"
      R"("devDependencies":{"d":"2"},"files":["name"]})",
      true);
  REQUIRE(j);
  CHECK(j->name == "a");
  CHECK(j->version == "1.2.3");
  CHECK(j->dependencies == std::set<std::string>{"b", "c", "d"});
  CHECK(snap::ParsePackageJson(R"({"name":"a","dependencies":{"b":"1"}})", false)->dependencies.empty());
  for (const char* bad : {"", "[1]", "\"name\"", "{\"name\":", "{} {}", "{\"a\":1,}"}) {
    INFO(bad);
    CHECK_FALSE(snap::ParsePackageJson(bad, true));
  }
  std::string deep = std::string(600000, '[') + std::string(600000, ']');
  CHECK_FALSE(snap::ParsePackageJson(deep, true));  // over the size cap
  deep = "{\"x\":" + std::string(400000, '[') + std::string(400000, ']') + ",\"name\":\"deep\"}";
  auto d = snap::ParsePackageJson(deep, true);
  REQUIRE(d);
  CHECK(d->name == "deep");
}

TEST_CASE("packages: labels stay short and say what a model needs first", "[snap][packages]") {
  PackageDeltas d;
  d.items = {Apt('~', "openssl", "3.0.11", "3.0.13")};
  CHECK(snap::PackageLabel(d) == "apt ~openssl 3.0.11 -> 3.0.13");
  CHECK(snap::LeadWithPackages(d, "exec: apt-get upgrade") == "apt ~openssl 3.0.11 -> 3.0.13; exec: apt-get upgrade");
  // A label that already leads with them (an OCI replay) is left alone.
  CHECK(snap::LeadWithPackages(d, "apt ~openssl 3.0.11 -> 3.0.13; exec: x") == "apt ~openssl 3.0.11 -> 3.0.13; exec: x");
  CHECK(snap::LeadWithPackages(d, "") == "apt ~openssl 3.0.11 -> 3.0.13");
  CHECK(snap::WithoutPackages("apt ~openssl 3.0.11 -> 3.0.13; exec: x", d) == "exec: x");
  CHECK(snap::WithoutPackages("exec: x", d) == "exec: x");
  CHECK(snap::LeadWithPackages({}, "exec: x") == "exec: x");

  PackageDeltas npm;
  npm.items.push_back({Ecosystem::kNpm, '+', "left-pad", "", "1.3.0", "node_modules", false});
  for (int i = 0; i < 12; ++i) npm.items.push_back({Ecosystem::kNpm, '+', "d" + std::to_string(i), "", "1", "node_modules", true});
  CHECK(snap::PackageLabel(npm) == "npm +left-pad 1.3.0 (+12 deps)");

  PackageDeltas big;
  for (int i = 0; i < 200; ++i) big.items.push_back(Apt('+', "package-number-" + std::to_string(i), "", "1.0." + std::to_string(i)));
  big.omitted[Ecosystem::kApt] = 50;
  big.items.push_back({Ecosystem::kPip, '+', "requests", "", "2.31.0", "x", false});
  big.items.push_back({Ecosystem::kGit, '+', "p", "", "", "root/p", false});
  std::string label = snap::PackageLabel(big);
  INFO(label);
  CHECK(label.size() <= snap::kMaxLabelPrefix + 60);
  CHECK(label.starts_with("apt +package-number-0 1.0.0 +package-number-1 1.0.1 "));
  CHECK(label.find(" more)") != std::string::npos);
  CHECK(label.find("; pip ") != std::string::npos);
  CHECK(label.find("; new git repo") != std::string::npos);

  PackageDeltas long_name;
  long_name.items = {Apt('+', std::string(100, 'n'), "", std::string(100, 'v'))};
  CHECK(snap::PackageLabel(long_name).size() < 100);
}

}  // namespace
}  // namespace agentenv::test
