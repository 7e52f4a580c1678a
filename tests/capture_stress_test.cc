// Randomized capture stress: many small filesystem changes while `agentenv
// daemon` captures automatically; the history it makes must hold every
// state exactly. Seed: $AGENTENV_STRESS_SEED (printed on failure).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <random>

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

constexpr int kQuietMs = 70;
constexpr int kMaxDelayMs = 300;
constexpr int kOps = 1500;
constexpr int kCheckpoints = 4;

class Mutator {
 public:
  Mutator(fs::path work, uint64_t seed) : w_(std::move(work)), rng_(seed) {
    // user.* xattrs need filesystem support: probe once.
    fs::path probe = w_ / "xattr-probe";
    WriteFile(probe, "");
    xattrs_ = ::lsetxattr(probe.c_str(), "user.probe", "1", 1, 0) == 0;
    fs::remove(probe);
  }
  bool xattrs() const { return xattrs_; }

  // One random change; returns a short description for failure messages.
  std::string Step() {
    Scan();
    int kind = Pick(100);
    if (entries_ > 300 && kind < 40) kind = 95;  // keep the tree small: delete
    if (kind < 14) return CreateFile();
    if (kind < 26) return Overwrite();
    if (kind < 34) return Append();
    if (kind < 40) return Truncate();
    if (kind < 48) return RenameFile();
    if (kind < 53) return RenameDir();
    if (kind < 60) return MakeDir();
    if (kind < 66) return Chmod();
    if (kind < 72) return Xattr();
    if (kind < 77) return Hardlink();
    if (kind < 83) return Symlink();
    if (kind < 87) return AtomicSave();
    if (kind < 90) return ReplaceType();
    if (kind < 95) return DeleteFile();
    return DeleteTree();
  }

 private:
  int Pick(int n) { return int(rng_() % uint64_t(n)); }
  template <class T>
  const T& Any(const std::vector<T>& v) { return v[size_t(Pick(int(v.size())))]; }

  void Scan() {
    dirs_ = {""};
    files_.clear();
    all_.clear();
    entries_ = 0;
    for (auto it = fs::recursive_directory_iterator(w_); it != fs::recursive_directory_iterator(); ++it) {
      std::string rel = fs::relative(it->path(), w_).string();
      ++entries_;
      all_.push_back(rel);
      if (it->is_symlink()) continue;
      if (it->is_directory()) dirs_.push_back(rel);
      else if (it->is_regular_file()) files_.push_back(rel);
    }
  }
  fs::path P(const std::string& rel) const { return rel.empty() ? w_ : w_ / rel; }
  std::string Join(const std::string& dir, const std::string& name) const {
    return dir.empty() ? name : dir + "/" + name;
  }
  std::string NewName(const char* prefix) { return prefix + std::to_string(Pick(24)); }
  std::string Content() {
    int r = Pick(100);
    size_t n = r < 10 ? 0 : r < 85 ? size_t(Pick(4096)) : r < 97 ? size_t(Pick(40000)) : size_t(150000 + Pick(100000));
    std::string s(n, '\0');
    for (auto& c : s) c = char('a' + Pick(26));
    return s;
  }
  bool IsDir(const std::string& rel) const {
    struct stat st;
    return ::lstat(P(rel).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  bool Exists(const std::string& rel) const {
    struct stat st;
    return ::lstat(P(rel).c_str(), &st) == 0;
  }
  static void Write(const fs::path& p, const std::string& data, int flags) {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
    if (fd < 0) return;
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n <= 0) break;
      done += size_t(n);
    }
    ::close(fd);
  }

  std::string CreateFile() {
    std::string rel = Join(Any(dirs_), NewName("f"));
    if (IsDir(rel)) return "skip";
    Write(P(rel), Content(), O_TRUNC);
    return "create " + rel;
  }
  std::string Overwrite() {
    if (files_.empty()) return CreateFile();
    const std::string& rel = Any(files_);
    Write(P(rel), Content(), O_TRUNC);
    return "overwrite " + rel;
  }
  std::string Append() {
    if (files_.empty()) return CreateFile();
    const std::string& rel = Any(files_);
    Write(P(rel), Content().substr(0, 3000), O_APPEND);
    return "append " + rel;
  }
  std::string Truncate() {
    if (files_.empty()) return CreateFile();
    const std::string& rel = Any(files_);
    off_t size = Pick(3) == 0 ? off_t(Pick(20000)) : off_t(Pick(100));
    if (::truncate(P(rel).c_str(), size) != 0) return "skip";
    return "truncate " + rel + " " + std::to_string(size);
  }
  std::string RenameFile() {
    if (files_.empty()) return CreateFile();
    std::string from = Any(files_);
    std::string to = Join(Any(dirs_), NewName("f"));
    if (IsDir(to) || from == to) return "skip";
    if (::rename(P(from).c_str(), P(to).c_str()) != 0) return "skip";
    return "rename " + from + " -> " + to;
  }
  std::string RenameDir() {
    if (dirs_.size() < 2) return MakeDir();
    std::string from = dirs_[1 + size_t(Pick(int(dirs_.size()) - 1))];
    std::string parent = Any(dirs_);
    if (parent == from || parent.rfind(from + "/", 0) == 0) return "skip";  // not into itself
    std::string to = Join(parent, NewName("d"));
    if (Exists(to) && !IsDir(to)) return "skip";
    if (::rename(P(from).c_str(), P(to).c_str()) != 0) return "skip";  // e.g. non-empty target
    return "rename dir " + from + " -> " + to;
  }
  std::string MakeDir() {
    std::string parent = Any(dirs_);
    if (std::count(parent.begin(), parent.end(), '/') >= 3) parent = "";
    std::string rel = Join(parent, NewName("d"));
    if (::mkdir(P(rel).c_str(), 0755) != 0) return "skip";
    return "mkdir " + rel;
  }
  std::string Chmod() {
    if (all_.empty()) return CreateFile();
    const std::string& rel = Any(all_);
    struct stat st;
    if (::lstat(P(rel).c_str(), &st) != 0 || S_ISLNK(st.st_mode)) return "skip";
    static const mode_t kFile[] = {0600, 0644, 0755, 0400, 0664, 04755};
    static const mode_t kDir[] = {0755, 0700, 0750, 0775, 01777};
    mode_t m = S_ISDIR(st.st_mode) ? kDir[Pick(5)] : kFile[Pick(6)];
    ::chmod(P(rel).c_str(), m);
    return "chmod " + rel;
  }
  std::string Xattr() {
    if (!xattrs_ || all_.empty()) return Chmod();
    const std::string& rel = Any(all_);
    if (fs::is_symlink(P(rel))) return "skip";
    std::string name = "user.k" + std::to_string(Pick(3));
    if (Pick(4) == 0) {
      ::lremovexattr(P(rel).c_str(), name.c_str());
      return "rmxattr " + rel;
    }
    std::string v = "v" + std::to_string(Pick(1000));
    ::lsetxattr(P(rel).c_str(), name.c_str(), v.data(), v.size(), 0);
    return "setxattr " + rel + " " + name;
  }
  std::string Hardlink() {
    if (files_.empty()) return CreateFile();
    std::string from = Any(files_);
    std::string to = Join(Any(dirs_), NewName("h"));
    if (::link(P(from).c_str(), P(to).c_str()) != 0) return "skip";
    return "link " + from + " -> " + to;
  }
  std::string Symlink() {
    std::string rel = Join(Any(dirs_), NewName("l"));
    std::string target = Pick(3) == 0 ? "/etc/hostname" : all_.empty() || Pick(4) == 0 ? "dangling" : "../" + Any(all_);
    if (::symlink(target.c_str(), P(rel).c_str()) != 0) return "skip";
    return "symlink " + rel + " -> " + target;
  }
  std::string AtomicSave() {
    if (files_.empty()) return CreateFile();
    const std::string& rel = Any(files_);
    fs::path tmp = P(rel).parent_path() / ("save" + std::to_string(Pick(1000)) + ".part");
    Write(tmp, Content(), O_TRUNC | O_EXCL);
    if (::rename(tmp.c_str(), P(rel).c_str()) != 0) ::unlink(tmp.c_str());
    return "atomic save " + rel;
  }
  std::string ReplaceType() {
    if (files_.empty()) return MakeDir();
    const std::string& rel = Any(files_);
    ::unlink(P(rel).c_str());
    if (::mkdir(P(rel).c_str(), 0755) != 0) return "skip";
    Write(P(rel) / "inside", "was a file\n", O_TRUNC);
    return "file to dir " + rel;
  }
  std::string DeleteFile() {
    if (all_.empty()) return CreateFile();
    const std::string& rel = Any(all_);
    if (IsDir(rel)) return "skip";
    ::unlink(P(rel).c_str());
    return "unlink " + rel;
  }
  std::string DeleteTree() {
    if (dirs_.size() < 2) return MakeDir();
    std::string rel = dirs_[1 + size_t(Pick(int(dirs_.size()) - 1))];
    std::error_code ec;
    fs::remove_all(P(rel), ec);
    return "rm -r " + rel;
  }

  fs::path w_;
  std::mt19937_64 rng_;
  bool xattrs_ = false;
  std::vector<std::string> dirs_, files_, all_;
  size_t entries_ = 0;
};

// Waits until capture has settled (no change for longer than the debounce
// allows, HEAD stable); returns HEAD's id.
std::string Settle(const fs::path& root) {
  std::this_thread::sleep_for(std::chrono::milliseconds(kQuietMs + kMaxDelayMs + 300));
  std::string head = Ctl(root, "head")["node"].value("id", "");
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::string again = Ctl(root, "head")["node"].value("id", "");
    if (again == head) break;
    head = again;
  }
  return head;
}

}  // namespace

TEST_CASE("capture stress: random changes under the daemon are all captured, every state restorable",
          "[cli][daemon][stress][slow]") {
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("AGENTENV_STRESS_SEED")) seed = std::strtoull(s, nullptr, 10);
  INFO("AGENTENV_STRESS_SEED=" << seed);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  TempDir tmp;
  fs::create_directories(tmp / "src/etc");
  WriteFile(tmp / "src/etc/hostname", "box\n");
  WriteFile(tmp / "src/readme", "start\n");
  fs::path root = tmp / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", (tmp / "src").string()}).code == 0);
  fs::path work = root / "work/current";

  auto daemon = std::make_unique<Daemon>(
      root, std::vector<std::string>{"--quiet-ms", std::to_string(kQuietMs), "--max-delay-ms", std::to_string(kMaxDelayMs)});
  REQUIRE(daemon->WaitReady());
  Mutator mut(work, seed);
  if (!mut.xattrs()) WARN("user.* xattrs unsupported on " << work << ": not exercised");

  std::set<int> at;
  while (int(at.size()) < kCheckpoints) at.insert(100 + int(rng() % (kOps - 100)));
  struct Checkpoint {
    int op;
    std::string node;
    Manifest manifest;
  };
  std::vector<Checkpoint> checkpoints;
  std::vector<std::string> recent;  // the last operations, for failure messages
  auto t0 = Clock::now();
  for (int i = 0; i < kOps; ++i) {
    recent.push_back(mut.Step());
    if (recent.size() > 30) recent.erase(recent.begin());
    if (rng() % 60 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 250));  // let captures run
    if (at.count(i)) {
      std::string head = Settle(root);
      Manifest m = TreeManifest(work);
      json st = Ctl(root, "status");
      std::string last;
      for (const auto& s : recent) last += s + "\n";
      INFO("checkpoint after op " << i << "; last operations:\n" << last << "status: " << st.dump().substr(0, 2000));
      CHECK(st.value("dirty", true) == false);  // everything was captured once quiet
      CHECK(st["head"].value("id", "") == head);
      checkpoints.push_back({i, head, std::move(m)});
    }
  }
  std::string final_head = Settle(root);
  Manifest final_manifest = TreeManifest(work);
  json log = Ctl(root, "log", {"limit=100000"});
  size_t nodes = log["nodes"].size();
  REQUIRE(daemon->Stop() == 0);
  std::string daemon_log = daemon->Log();
  daemon.reset();
  INFO("daemon log (tail):\n" << daemon_log.substr(daemon_log.size() > 4000 ? daemon_log.size() - 4000 : 0));
  {
    std::istringstream lines(daemon_log);
    int failed = 0;
    for (std::string line; std::getline(lines, line);)
      if (line.find("snapshot failed") != std::string::npos && ++failed <= 3) WARN("daemon: " << line);
    if (failed) WARN(failed << " automatic snapshots failed; their change sets are not retried (see the vanishing-directory test)");
  }
  CHECK(nodes > 10);  // auto-snapshots happened along the way

  // The last automatic node equals a full scan of the live tree.
  CHECK(HeadId(root) == final_head);
  int code = -1;
  json snap = AgentenvJson(root, {"snap"}, &code);
  CHECK(code == 0);
  INFO("full scan after the daemon: " << snap.dump().substr(0, 2000));
  CHECK(snap.value("created", true) == false);
  CHECK(ManifestDiff(final_manifest, TreeManifest(work)) == "");

  // Every recorded state comes back exactly.
  for (const auto& c : checkpoints) {
    INFO("checkpoint after op " << c.op << " node " << c.node);
    CmdResult r = Agentenv(root, {"restore", c.node, "--json"});
    INFO(r.Describe());
    REQUIRE(r.code == 0);
    CHECK(ManifestDiff(c.manifest, TreeManifest(work)) == "");
  }
  CmdResult r = Agentenv(root, {"restore", final_head});
  REQUIRE(r.code == 0);
  CHECK(ManifestDiff(final_manifest, TreeManifest(work)) == "");
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  WARN("capture stress: seed " << seed << ", " << kOps << " ops, " << nodes << " nodes, " << secs << " s");
}

}  // namespace agentenv::test

namespace agentenv::test {

// A directory that vanishes while a capture scans it must not cost the
// other changes of the same change set (they are not touched again here).
TEST_CASE("capture: a directory deleted during a capture loses no other change", "[cli][daemon][slow]") {
  TempDir tmp;
  fs::create_directories(tmp / "src");
  WriteFile(tmp / "src/readme", "start\n");
  fs::path root = tmp / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", (tmp / "src").string()}).code == 0);
  fs::path work = root / "work/current";
  Daemon daemon(root, {"--quiet-ms", "20", "--max-delay-ms", "40"});
  REQUIRE(daemon.WaitReady());
  std::mt19937_64 rng(42);
  for (int round = 0; round < 60; ++round) {
    WriteFile(work / ("keep" + std::to_string(round) + ".txt"), std::to_string(round));
    fs::path q = work / "vanishing";
    for (int i = 0; i < 60; ++i) {
      fs::create_directories(q / ("d" + std::to_string(i)) / "e");
      WriteFile(q / ("d" + std::to_string(i)) / "e/f", "x");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15 + rng() % 40));
    fs::remove_all(q);
  }
  Settle(root);
  json st = Ctl(root, "status");
  std::string failures;
  {
    std::istringstream lines(daemon.Log());
    for (std::string line; std::getline(lines, line);)
      if (line.find("failed") != std::string::npos) failures += line + "\n";
  }
  INFO("changes not captured: " << st["changes"].dump().substr(0, 1500) << "\ndaemon failures:\n" << failures);
  CHECK(st.value("dirty", true) == false);
  CHECK(daemon.Stop() == 0);
}

}  // namespace agentenv::test

namespace agentenv::test {

// A rollback through the daemon takes the uncommitted changes from the
// journal (flushed into a node at once, however long the quiet period) and
// the restore's own writes never become a node.
TEST_CASE("daemon rollback: journal changes saved first, restored files are no new node", "[cli][daemon]") {
  TempDir tmp;
  fs::create_directories(tmp / "src/etc");
  for (int i = 0; i < 20; ++i) WriteFile(tmp / "src/etc" / ("f" + std::to_string(i)), "v0 " + std::to_string(i));
  fs::path root = tmp / "repo";
  REQUIRE(Agentenv(root, {"init", "--from", (tmp / "src").string()}).code == 0);
  fs::path work = root / "work/current";
  // Long debounce: nothing is captured by time during the test.
  Daemon daemon(root, {"--quiet-ms", "3000", "--max-delay-ms", "60000"});
  REQUIRE(daemon.WaitReady());
  INFO("daemon log:\n" << daemon.Log());
  std::string a = HeadId(root);
  for (int i = 0; i < 20; i += 2) WriteFile(work / "etc" / ("f" + std::to_string(i)), "v1 " + std::to_string(i));
  json b = Ctl(root, "snapshot", {"message=b"});
  REQUIRE(b.value("created", false));

  WriteFile(work / "etc/uncommitted", "not yet captured");
  json r = Ctl(root, "rollback", {"ref=" + a});
  REQUIRE(r.is_object());
  // The journal's change became a node before the restore, not a save by scan.
  CHECK(r["saved"].is_null());
  CHECK(r.value("files_written", 0) == 10);
  CHECK_FALSE(fs::exists(work / "etc/uncommitted"));
  CHECK(ReadFile(work / "etc/f0") == "v0 0");
  json log = Ctl(root, "log", {"limit=100"});
  REQUIRE(log.is_object());
  REQUIRE(log["nodes"].size() >= 3);
  CHECK(log["nodes"][0]["title"].get<std::string>().find("etc/uncommitted") != std::string::npos);
  size_t nodes = log["nodes"].size();

  // The restore's writes reach the journal; their capture makes no node.
  json flushed = Ctl(root, "rollback", {"ref=" + a});
  REQUIRE(flushed.is_object());
  CHECK(flushed.value("files_written", 1) == 0);
  log = Ctl(root, "log", {"limit=100"});
  CHECK(log["nodes"].size() == nodes);
  CHECK(HeadId(root) == a);
  CHECK(Ctl(root, "status").value("dirty", true) == false);
  std::string dlog = daemon.Log();
  size_t made = 0;
  for (size_t at = dlog.find(": node "); at != std::string::npos; at = dlog.find(": node ", at + 1)) ++made;
  CHECK(made == 1);  // only the flushed change
  CHECK(daemon.Stop() == 0);
}

}  // namespace agentenv::test
