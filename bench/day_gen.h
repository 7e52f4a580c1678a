// day_gen: a realistic day of automatic capture, made through the snap/
// library with an injected clock (history_gen day, tests/digest_test.cc).
//
// 08:00-11:50, 13:00-15:00 and 15:30-18:30: an agent edits a Python
// project (one to three files per capture, a capture every ~13 s), runs
// its tests and builds, and between those installs packages the way the
// tools write their databases: apt (dpkg's status rewritten whole,
// extended_states marking dependencies, files under usr/), pip
// (dist-info directories with METADATA and REQUESTED in
// usr/local/lib/python3.11/dist-packages), npm (package.json of the
// project, node_modules/<name>/package.json). At 14:31 a bad edit is
// rolled back to a node 15 captures earlier; at 16:10 a tournament of
// three candidates (each a pip install in a branch from the same base,
// labelled as control/ labels them) applies its second. A tag at 17:00.
// Every node is a Repo::Snapshot of the changed paths, as the daemon
// makes them.
#pragma once

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "snap/repo.h"

namespace agentenv::bench {

struct DayResult {
  size_t nodes = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::vector<std::string> packages;  // every package name that changed on the live line
  std::vector<std::string> tournament_packages;
  std::string rollback_target;   // short id
  std::string tournament_id;     // "t-..."
  std::string tournament_winner;  // the applied candidate's command
  std::string tag;
};

class DayGen {
 public:
  DayGen(snap::Repo& repo, int64_t start_ns, size_t target_nodes)
      : repo_(repo), work_(repo.work_dir()), now_(start_ns), target_(target_nodes) {}

  Result<DayResult> Run() {
    res_.start_ns = now_;
    Base();
    AE_TRY(Snap("", "initial tree"));
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
    AE_TRY(Rollback(15));
    AE_TRY(Work(Until(15, 0)));
    // Late afternoon.
    now_ = At(15, 30);
    AE_TRY(Upgrade("curl", "7.88.1-10", "7.88.1-10+deb12u5"));
    AE_TRY(Work(Until(16, 10)));
    AE_TRY(Tournament());
    AE_TRY(Work(Until(17, 0)));
    AE_TRY(repo_.Tag("release-candidate", "HEAD"));
    res_.tag = "release-candidate";
    AE_TRY(Remove("vim", "2:9.0.1378-2"));
    AE_TRY(Work(Until(18, 30)));
    res_.end_ns = now_;
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

  Result<void> Snap(const std::string& label, const std::string& message = "") {
    snap::SnapOptions o;
    o.time_ns = now_;
    o.label = label;
    o.message = message;
    if (res_.nodes > 0) o.paths = changed_;
    changed_.clear();
    AE_ASSIGN(snap::SnapResult r, repo_.Snapshot(o));
    if (r.node) ++res_.nodes;
    now_ += step_;
    return {};
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

  // Edits, test runs and builds until `end`.
  Result<void> Work(int64_t end) {
    while (now_ < end && res_.nodes < target_ * 2) {
      ++rev_;
      std::string label;
      if (rev_ % 17 == 0) {
        Put("root/proj/.pytest_cache/v/cache/lastfailed", "{}\n" + std::to_string(rev_));
        label = "exec: /bin/sh -c python3 -m pytest -q";
      } else if (rev_ % 41 == 0) {
        for (int i = 0; i < 6; ++i) Put("root/proj/build/mod" + std::to_string(i) + ".o", Code(i, rev_));
        label = "exec: /bin/sh -c make -j4";
      } else {
        for (long k = 0; k <= rev_ % 3; ++k) {
          int f = int((rev_ * 7 + k * 13) % 40);
          Put(Src(f), Code(f, rev_));
        }
      }
      AE_TRY(Snap(label));
    }
    return {};
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
    return Snap("exec: /bin/sh -c apt-get install -y" + names);
  }

  Result<void> Upgrade(const std::string& name, const std::string& from, const std::string& to) {
    (void)from;
    dpkg_[name] = to;
    Put("usr/bin/" + name, "ELF " + name + " " + to);
    WriteDpkg();
    res_.packages.push_back(name);
    return Snap("exec: /bin/sh -c apt-get install -y --only-upgrade " + name);
  }

  Result<void> Remove(const std::string& name, const std::string& version) {
    (void)version;
    dpkg_.erase(name);
    Drop("usr/bin/" + name);
    WriteDpkg();
    res_.packages.push_back(name);
    return Snap("exec: /bin/sh -c apt-get remove -y " + name);
  }

  void PipFiles(const std::string& name, const std::string& version, bool requested) {
    const std::string site = "usr/local/lib/python3.11/dist-packages/";
    std::string dist = site + name + "-" + version + ".dist-info/";
    Put(dist + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n\nA package.\n");
    Put(dist + "RECORD", "");
    Put(dist + "INSTALLER", "pip\n");
    if (requested) Put(dist + "REQUESTED", "");
    Put(site + name + "/__init__.py", "__version__ = '" + version + "'\n");
  }

  Result<void> Pip(const std::string& name, const std::string& version, const Pkgs& deps) {
    PipFiles(name, version, true);
    res_.packages.push_back(name);
    for (const auto& [n, v] : deps) {
      PipFiles(n, v, false);
      res_.packages.push_back(n);
    }
    return Snap("exec: /bin/sh -c pip install " + name);
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
    return Snap("exec: /bin/sh -c npm install " + name);
  }

  // A bad edit, then back to the node `back` captures before it.
  Result<void> Rollback(int back) {
    Put(Src(0), "syntax error (\n");
    AE_TRY(Snap(""));
    AE_ASSIGN(store::ObjectId target, repo_.Resolve("HEAD~" + std::to_string(back)));
    AE_TRY(repo_.Restore(target.Hex()));
    res_.rollback_target = target.Hex().substr(0, 12);
    now_ += 60 * kSec;
    return {};
  }

  // Three candidates branch from HEAD, each installing another numpy; the
  // second is applied (as control/'s tournament labels and applies them).
  Result<void> Tournament() {
    AE_ASSIGN(store::ObjectId base, repo_.Resolve("HEAD"));
    res_.tournament_id = "t-" + base.Hex().substr(0, 8);
    const std::vector<std::string> versions = {"1.24.4", "1.26.4", "2.0.0"};
    std::vector<store::ObjectId> nodes;
    for (const std::string& v : versions) {
      AE_TRY(repo_.Restore(base.Hex()));
      PipFiles("numpy", v, true);
      std::string cmd = "pip install numpy==" + v;
      AE_TRY(Snap("tournament " + res_.tournament_id + ": " + cmd));
      AE_ASSIGN(store::ObjectId id, repo_.Resolve("HEAD"));
      nodes.push_back(id);
    }
    res_.tournament_packages.push_back("numpy");
    AE_TRY(repo_.Restore(nodes[1].Hex()));
    res_.tournament_winner = "pip install numpy==" + versions[1];
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
