// day_gen: a realistic day of an agent's work, made through the snap/
// library with an injected clock (history_gen day, tests/digest_test.cc),
// each node with the provenance the commands that make it record.
//
// 08:00-11:50, 13:00-15:00 and 15:30-18:30: an agent edits a Python
// project (one to three files per capture, a capture every ~13 s), runs
// its tests (every third run fails: exit 1), builds (a C build that fails
// once: exit 2) and commits with git, and between those installs packages
// the way the tools write their databases: apt (dpkg's status rewritten
// whole, extended_states marking dependencies, files under usr/), pip
// (dist-info directories with METADATA and REQUESTED in
// usr/local/lib/python3.11/dist-packages), npm (package.json of the
// project, node_modules/<name>/package.json, a lock file and a cache). At
// 14:25 the agent uninstalls left-pad and runs `rm -rf /root/proj/src`;
// both are rolled back to the node before them. At 15:40 a fork
// "try-flask" installs flask in a workspace (never on HEAD's line). At
// 16:10 a tournament of three candidates (each a pip install in a
// workspace from the same base) applies its second. A tag at 17:00.
// Captures are Repo::Snapshot of the changed paths, as the daemon makes
// them; workspace nodes are Repo::SnapshotUpper of an overlay upper.
#pragma once

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "snap/provenance.h"
#include "snap/repo.h"

namespace agentenv::bench {

struct DayResult {
  size_t nodes = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::vector<std::string> packages;  // every package name that changed on HEAD's line
  std::vector<std::string> tournament_packages;
  std::string rollback_target;   // short id
  std::string rollback_from;     // short id: HEAD when it happened
  std::vector<std::string> undone_commands;  // the commands the rollback undid
  std::string tournament_id;     // "t-..."
  std::string tournament_winner;  // the applied candidate's command
  uint32_t tournament_winner_index = 0;  // from 0
  std::string fork;              // the fork's workspace
  std::string fork_package;      // installed in the fork only
  size_t failed_tests = 0;       // pytest runs that exited 1
  std::string first_failure;     // "HH:MM" of the first
  std::string tag;
};

class DayGen {
 public:
  DayGen(snap::Repo& repo, int64_t start_ns, size_t target_nodes)
      : repo_(repo), work_(repo.work_dir()), now_(start_ns), target_(target_nodes) {}

  Result<DayResult> Run() {
    res_.start_ns = now_;
    Base();
    snap::Provenance init;
    init.kind = snap::ProvenanceKind::kInit;
    init.source = "debootstrap bookworm";
    AE_TRY(Snap(init, "initial tree"));
    // ~13 s between captures over 8h50 of activity for ~2,400 nodes.
    const int64_t active = int64_t(8 * 3600 + 50 * 60);
    step_ = std::max<int64_t>(1, active / int64_t(target_)) * kSec;
    // Morning.
    AE_TRY(Apt({{"jq", "1.6-2.1"}}, {{"libjq1", "1.6-2.1"}, {"libonig5", "6.9.8-1"}}));
    AE_TRY(Work(Until(9, 10)));
    AE_TRY(Pip("requests", "2.31.0", {{"certifi", "2022.9.24"}, {"idna", "3.3"}, {"urllib3", "1.26.12"}, {"charset-normalizer", "3.0.1"}}));
    AE_TRY(Work(Until(10, 20)));
    AE_TRY(Apt({{"build-essential", "12.9"}}, {{"make", "4.3-4.1"}, {"g++", "4:12.2.0-3"}, {"dpkg-dev", "1.21.22"}}));
    AE_TRY(Work(Until(11, 50)));
    // After lunch.
    now_ = At(13, 0);
    AE_TRY(Npm("left-pad", "1.3.0", {{"wcwidth", "1.0.1"}}));
    AE_TRY(Work(Until(14, 25)));
    AE_TRY(Rollback());
    AE_TRY(Work(Until(15, 0)));
    // Late afternoon.
    now_ = At(15, 30);
    AE_TRY(Upgrade("curl", "7.88.1-10", "7.88.1-10+deb12u5"));
    AE_TRY(Work(Until(15, 40)));
    AE_TRY(Fork());
    AE_TRY(Work(Until(16, 10)));
    AE_TRY(Tournament());
    AE_TRY(Work(Until(17, 0)));
    AE_TRY(repo_.Tag("release-candidate", "HEAD"));
    res_.tag = "release-candidate";
    AE_TRY(Remove("vim", "2:9.0.1378-2"));
    AE_TRY(Work(Until(18, 30)));
    res_.end_ns = now_;
    std::error_code ec;
    std::filesystem::remove_all(Uppers(), ec);
    return res_;
  }

 private:
  static constexpr int64_t kSec = 1000000000;
  using Pkgs = std::vector<std::pair<std::string, std::string>>;

  int64_t At(int h, int m) const { return day_ + (int64_t(h) * 3600 + int64_t(m) * 60) * kSec; }
  int64_t Until(int h, int m) const { return At(h, m); }

  // Writes a file; the changed path is the file, or the highest directory
  // made for it (as a journal reports a new directory).
  void Put(const std::string& rel, const std::string& data) {
    std::filesystem::path p = std::filesystem::path(work_) / rel;
    std::string top = rel;
    for (std::filesystem::path d = std::filesystem::path(rel).parent_path(); !d.empty(); d = d.parent_path())
      if (!std::filesystem::exists(std::filesystem::path(work_) / d)) top = d.string();
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
    changed_.push_back(top);
  }
  void Drop(const std::string& rel) {
    std::filesystem::remove_all(std::filesystem::path(work_) / rel);
    changed_.push_back(rel);
  }

  static snap::Provenance Capture() {
    snap::Provenance p;
    p.kind = snap::ProvenanceKind::kCapture;
    p.who.origin = snap::Origin::kCapture;
    return p;
  }
  // An exec'd shell command and how it ended.
  static snap::Provenance Exec(const std::string& cmd, int exit_code = 0) {
    snap::Provenance p;
    p.kind = snap::ProvenanceKind::kExec;
    p.argv = {"/bin/sh", "-c", cmd};
    p.cwd = "/root/proj";
    p.outcome.exit_code = exit_code;
    p.outcome.duration_ms = 1200;
    p.who.origin = snap::Origin::kMcp;
    p.who.client = "coding-agent";
    return p;
  }

  Result<void> Snap(const snap::Provenance& made_by, const std::string& message = "") {
    snap::SnapOptions o;
    o.time_ns = now_;
    o.message = message;
    o.provenance = made_by;
    if (res_.nodes > 0) o.paths = changed_;
    changed_.clear();
    AE_ASSIGN(snap::SnapResult r, repo_.Snapshot(o));
    if (r.node) ++res_.nodes;
    now_ += step_;
    return {};
  }

  // Where workspace uppers are made (removed at the end).
  std::string Uppers() const { return (std::filesystem::path(work_).parent_path() / "day-uppers").string(); }

  // A node of a workspace forked from `base`: `files` written in its
  // upper over `parent`'s tree.
  Result<store::ObjectId> WorkspaceNode(const std::string& name, const store::ObjectId& base, const store::ObjectId& parent,
                                        const std::map<std::string, std::string>& files, snap::Provenance made_by) {
    std::filesystem::path upper = std::filesystem::path(Uppers()) / name;
    for (const auto& [rel, data] : files) {
      std::filesystem::create_directories((upper / rel).parent_path());
      std::ofstream(upper / rel, std::ios::binary | std::ios::trunc) << data;
    }
    made_by.workspace = name;
    made_by.base = base;
    snap::SnapOptions o;
    o.time_ns = now_;
    o.provenance = std::move(made_by);
    AE_ASSIGN(snap::SnapResult r, repo_.SnapshotUpper(upper.string(), base, parent, o));
    if (!r.node) return Fail(ErrorCode::kInvalid, "day_gen: workspace " + name + " made no node");
    ++res_.nodes;
    now_ += step_;
    return *r.node;
  }

  std::string Status() const {
    std::string s;
    for (const auto& [name, version] : dpkg_)
      s += "Package: " + name + "\nStatus: install ok installed\nPriority: optional\nArchitecture: amd64\nVersion: " +
           version + "\nDescription: " + name + "\n\n";
    return s;
  }
  std::string Extended() const {
    std::string s;
    for (const auto& name : auto_) s += "Package: " + name + "\nArchitecture: amd64\nAuto-Installed: 1\n\n";
    return s;
  }
  void WriteDpkg() {
    Put("var/lib/dpkg/status", Status());
    Put("var/lib/apt/extended_states", Extended());
  }

  void Base() {
    // Midnight (local) of the start's day.
    time_t t = time_t(now_ / kSec);
    struct tm tm;
    localtime_r(&t, &tm);
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    day_ = int64_t(::mktime(&tm)) * kSec;
    now_ = At(8, 0);
    for (int i = 0; i < 150; ++i) dpkg_["lib" + std::to_string(i) + "-base"] = "1.0-" + std::to_string(i);
    dpkg_["libc6"] = "2.36-9+deb12u4";
    dpkg_["vim"] = "2:9.0.1378-2";
    dpkg_["curl"] = "7.88.1-10";
    dpkg_["python3"] = "3.11.2-1+b1";
    WriteDpkg();
    Put("etc/hosts", "127.0.0.1 localhost\n");
    for (int i = 0; i < 40; ++i) Put(Src(i), Code(i, 0));
    for (int i = 0; i < 10; ++i) Put("root/proj/tests/test_" + std::to_string(i) + ".py", "def test(): pass\n");
    Put("root/proj/README.md", "# proj\n");
    Put("root/proj/web/package.json", "{\n  \"name\": \"web\",\n  \"version\": \"0.1.0\",\n  \"dependencies\": {}\n}\n");
  }

  static std::string Src(int i) { return "root/proj/src/mod" + std::to_string(i) + ".py"; }
  static std::string Code(int i, long rev) {
    return "# module " + std::to_string(i) + " rev " + std::to_string(rev) + "\n" + std::string(size_t(200 + i * 7), 'x') + "\n";
  }

  // Edits, test runs, builds and commits until `end`.
  Result<void> Work(int64_t end) {
    while (now_ < end && res_.nodes < target_ * 2) {
      ++rev_;
      snap::Provenance made_by = Capture();
      if (rev_ % 17 == 0) {
        Put("root/proj/.pytest_cache/v/cache/lastfailed", "{}\n" + std::to_string(rev_));
        const bool fails = rev_ % 51 == 0;  // every third run
        if (fails) {
          ++res_.failed_tests;
          if (res_.first_failure.empty()) res_.first_failure = Clock(now_);
        }
        made_by = Exec("python3 -m pytest -q tests/", fails ? 1 : 0);
      } else if (rev_ % 41 == 0) {
        for (int i = 0; i < 6; ++i) Put("root/proj/build/mod" + std::to_string(i) + ".o", Code(i, rev_));
        made_by = Exec("make -j4 -C build all", rev_ == 41 ? 2 : 0);
      } else if (rev_ % 97 == 0) {
        Put("root/proj/.git/index", "DIRC " + std::to_string(rev_));
        Put("root/proj/.git/objects/" + std::to_string(rev_ % 256) + "/obj" + std::to_string(rev_), "blob");
        made_by = Exec("git commit -qam 'wip " + std::to_string(rev_) + "'");
      } else {
        for (long k = 0; k <= rev_ % 3; ++k) {
          int f = int((rev_ * 7 + k * 13) % 40);
          Put(Src(f), Code(f, rev_));
        }
      }
      AE_TRY(Snap(made_by));
    }
    return {};
  }

  std::string Clock(int64_t ns) const {
    time_t t = time_t(ns / kSec);
    struct tm tm;
    localtime_r(&t, &tm);
    char buf[8];
    std::strftime(buf, sizeof buf, "%H:%M", &tm);
    return buf;
  }

  Result<void> Apt(const Pkgs& asked, const Pkgs& deps) {
    std::string names;
    for (const auto& [n, v] : asked) names += " " + n;
    for (const auto& [n, v] : asked) {
      dpkg_[n] = v;
      Put("usr/bin/" + n, "ELF " + n);
      res_.packages.push_back(n);
    }
    for (const auto& [n, v] : deps) {
      dpkg_[n] = v;
      auto_.insert(n);
      Put("usr/lib/x86_64-linux-gnu/" + n + ".so", "ELF " + n);
      res_.packages.push_back(n);
    }
    WriteDpkg();
    return Snap(Exec("apt-get install -y" + names));
  }

  Result<void> Upgrade(const std::string& name, const std::string& from, const std::string& to) {
    (void)from;
    dpkg_[name] = to;
    Put("usr/bin/" + name, "ELF " + name + " " + to);
    WriteDpkg();
    res_.packages.push_back(name);
    return Snap(Exec("apt-get install -y --only-upgrade " + name));
  }

  Result<void> Remove(const std::string& name, const std::string& version) {
    (void)version;
    dpkg_.erase(name);
    Drop("usr/bin/" + name);
    WriteDpkg();
    res_.packages.push_back(name);
    return Snap(Exec("apt-get remove -y " + name));
  }

  // The files pip writes for a package, tree-relative.
  static std::map<std::string, std::string> PipTree(const std::string& name, const std::string& version, bool requested) {
    const std::string site = "usr/local/lib/python3.11/dist-packages/";
    std::string dist = site + name + "-" + version + ".dist-info/";
    std::map<std::string, std::string> files = {
        {dist + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n\nA package.\n"},
        {dist + "RECORD", ""},
        {dist + "INSTALLER", "pip\n"},
        {site + name + "/__init__.py", "__version__ = '" + version + "'\n"},
        {"root/.cache/pip/http/" + name + "-" + version, "wheel"}};
    if (requested) files[dist + "REQUESTED"] = "";
    return files;
  }
  void PipFiles(const std::string& name, const std::string& version, bool requested) {
    for (const auto& [rel, data] : PipTree(name, version, requested)) Put(rel, data);
  }

  Result<void> Pip(const std::string& name, const std::string& version, const Pkgs& deps) {
    PipFiles(name, version, true);
    res_.packages.push_back(name);
    for (const auto& [n, v] : deps) {
      PipFiles(n, v, false);
      res_.packages.push_back(n);
    }
    return Snap(Exec("pip install " + name));
  }

  Result<void> Npm(const std::string& name, const std::string& version, const Pkgs& deps) {
    Put("root/proj/web/package.json", "{\n  \"name\": \"web\",\n  \"version\": \"0.1.0\",\n  \"dependencies\": {\n    \"" +
                                          name + "\": \"^" + version + "\"\n  }\n}\n");
    Put("root/proj/web/node_modules/" + name + "/package.json",
        "{\n  \"name\": \"" + name + "\",\n  \"version\": \"" + version + "\"\n}\n");
    res_.packages.push_back(name);
    for (const auto& [n, v] : deps) {
      Put("root/proj/web/node_modules/" + n + "/package.json", "{\n  \"name\": \"" + n + "\",\n  \"version\": \"" + v + "\"\n}\n");
      res_.packages.push_back(n);
    }
    Put("root/proj/web/package-lock.json", "{\"lockfileVersion\": 3}\n");
    Put("root/.npm/_cacache/index-v5/" + name, "cache");
    return Snap(Exec("npm install " + name));
  }

  // The agent uninstalls left-pad and removes the sources; both are
  // rolled back to the node before them (`restore`), which logs the move.
  Result<void> Rollback() {
    AE_ASSIGN(store::ObjectId target, repo_.Resolve("HEAD"));
    Drop("root/proj/web/node_modules/left-pad");
    Put("root/proj/web/package.json", "{\n  \"name\": \"web\",\n  \"version\": \"0.1.0\",\n  \"dependencies\": {}\n}\n");
    AE_TRY(Snap(Exec("cd web && npm uninstall left-pad")));
    Drop("root/proj/src");
    AE_TRY(Snap(Exec("rm -rf /root/proj/src")));
    Put("root/proj/.pytest_cache/v/cache/lastfailed", "{\"tests\": true}");
    AE_TRY(Snap(Exec("python3 -m pytest -q tests/", 4)));  // nothing left to test
    res_.undone_commands = {"cd web && npm uninstall left-pad", "rm -rf /root/proj/src"};
    AE_ASSIGN(store::ObjectId from, repo_.Resolve("HEAD"));
    snap::OpOptions op;
    op.who.origin = snap::Origin::kCli;
    op.time_ns = now_;
    AE_TRY(repo_.Restore(target.Hex(), std::nullopt, snap::RestoreMode::kInPlace, op));
    res_.rollback_target = target.Hex().substr(0, 12);
    res_.rollback_from = from.Hex().substr(0, 12);
    now_ += 60 * kSec;
    return {};
  }

  // A fork of HEAD tries a flask upgrade in a workspace; never applied.
  Result<void> Fork() {
    AE_ASSIGN(store::ObjectId base, repo_.Resolve("HEAD"));
    res_.fork = "try-flask";
    res_.fork_package = "flask";
    AE_ASSIGN(store::ObjectId n1, WorkspaceNode(res_.fork, base, base, PipTree("flask", "3.0.3", true), Exec("pip install flask==3.0.3")));
    auto tests = Exec("python3 -m pytest -q tests/", 1);
    AE_TRY(WorkspaceNode(res_.fork, base, n1, {{"root/proj/.pytest_cache/v/cache/lastfailed", "{\"flask\": true}"}}, tests));
    return {};
  }

  // Three candidates, each a workspace from HEAD installing another
  // numpy and tested; the second is applied (as trials/ records them).
  Result<void> Tournament() {
    AE_ASSIGN(store::ObjectId base, repo_.Resolve("HEAD"));
    res_.tournament_id = "t-" + base.Hex().substr(0, 8);
    const std::vector<std::string> versions = {"1.24.4", "1.26.4", "2.0.0"};
    std::vector<store::ObjectId> nodes;
    res_.tournament_winner_index = 1;
    for (uint32_t i = 0; i < versions.size(); ++i) {
      std::string cmd = "pip install numpy==" + versions[i] + " && python3 -m pytest -q tests/";
      snap::Provenance p = Exec(cmd, i == 0 ? 1 : 0);
      p.kind = snap::ProvenanceKind::kTournament;
      p.tournament = snap::TournamentRole{res_.tournament_id, i, uint32_t(versions.size()), i == 0 ? 1 : 0,
                                          i == res_.tournament_winner_index};
      AE_ASSIGN(store::ObjectId id, WorkspaceNode("tournament-" + std::to_string(i), base, base,
                                                  PipTree("numpy", versions[i], true), p));
      nodes.push_back(id);
    }
    res_.tournament_packages.push_back("numpy");
    snap::OpOptions op;
    op.kind = snap::OpKind::kTournamentApply;
    op.tournament = res_.tournament_id;
    op.time_ns = now_;
    AE_TRY(repo_.Restore(nodes[res_.tournament_winner_index].Hex(), std::nullopt, snap::RestoreMode::kInPlace, op));
    res_.tournament_winner = "pip install numpy==" + versions[res_.tournament_winner_index] + " && python3 -m pytest -q tests/";
    return {};
  }

  snap::Repo& repo_;
  std::string work_;
  int64_t now_, day_ = 0, step_ = kSec;
  size_t target_;
  long rev_ = 0;
  std::vector<std::string> changed_;
  std::map<std::string, std::string> dpkg_;
  std::set<std::string> auto_;
  DayResult res_;
};

}  // namespace agentenv::bench
